"""Health checks for /healthz: each returns None when up or a short reason when down."""

import asyncio

import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection

from core.worker_status import ping_workers

TIMEOUT = 2.0


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def check_broker() -> str | None:
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
        )
        client.ping()
        client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


async def _channel_layer_round_trip() -> None:
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    channel = await layer.new_channel("healthz.")
    await layer.send(channel, {"type": "healthz.ping"})
    message = await asyncio.wait_for(layer.receive(channel), TIMEOUT)
    if message.get("type") != "healthz.ping":
        raise RuntimeError(f"unexpected message {message!r}")


def check_channel_layer() -> str | None:
    try:
        async_to_sync(_channel_layer_round_trip)()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None


def check_worker() -> str | None:
    return None if ping_workers(timeout=1.0) else "no Celery worker answered a ping"


CHECKS = {
    "database": check_database,
    "broker": check_broker,
    "channel_layer": check_channel_layer,
    "worker": check_worker,
}


def run_checks() -> dict[str, str | None]:
    return {name: check() for name, check in CHECKS.items()}
