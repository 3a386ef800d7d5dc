"""Plumbing tasks for the tests: a ping for round trips and a group broadcast from a worker.

Found by Celery's autodiscovery in the test stack's worker (``test_support`` is installed by
the test settings only)."""

import os
import socket

from asgiref.sync import async_to_sync
from celery import shared_task
from channels.layers import get_channel_layer


@shared_task(name="test_support.ping", ignore_result=False)
def ping(payload=None):
    """Returns the payload with the worker's host and pid: proof a worker ran it."""
    return {"payload": payload, "host": socket.gethostname(), "pid": os.getpid()}


@shared_task(name="test_support.broadcast", ignore_result=False)
def broadcast(group: str, payload: dict):
    """Send ``payload`` to every socket in ``group`` (delivered as type echo.message)."""
    async_to_sync(get_channel_layer().group_send)(
        group, {"type": "echo.message", "payload": payload}
    )
    return {"group": group, "pid": os.getpid()}
