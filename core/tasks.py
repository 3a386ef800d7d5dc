"""Plumbing tasks: a ping for round-trip checks and a group broadcast from a worker."""

import os
import socket

from asgiref.sync import async_to_sync
from celery import shared_task
from channels.layers import get_channel_layer


@shared_task(name="core.ping")
def ping(payload=None):
    """Returns the payload with the worker's host and pid: proof a worker ran it."""
    return {"payload": payload, "host": socket.gethostname(), "pid": os.getpid()}


@shared_task(name="core.broadcast")
def broadcast(group: str, payload: dict):
    """Send ``payload`` to every socket in ``group`` (delivered as type echo.message)."""
    async_to_sync(get_channel_layer().group_send)(
        group, {"type": "echo.message", "payload": payload}
    )
    return {"group": group, "pid": os.getpid()}
