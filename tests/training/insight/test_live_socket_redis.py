"""The run page's socket against Redis as it really behaves.

* Idle: the channel layer's blocking pop (5 s) must not trip the Redis socket timeout, so a
  receive on a quiet channel waits instead of raising (the socket died every 5 s).
* Stalled (SIGSTOP on a private server, longer than any socket timeout): the run socket stays
  open, and when Redis returns it is sent a fresh snapshot and streams again.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from channels_redis.core import RedisChannelLayer

from project.redis_config import CHANNEL_LAYER_SOCKET_TIMEOUT
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")
from tests.training.conftest import make_run
from training.insight import live
from training.models import Run
from training.routing import websocket_urlpatterns


async def test_a_receive_on_an_idle_channel_waits_past_the_blocking_pop():
    layer = get_channel_layer()
    channel = await layer.new_channel("x.")
    receive = asyncio.ensure_future(layer.receive(channel))
    try:
        done, _ = await asyncio.wait({receive}, timeout=RedisChannelLayer.brpop_timeout + 2)
        assert not done, f"receive ended on an idle channel: {receive.exception()!r}"
        await layer.send(channel, {"type": "still.listening"})
        assert (await asyncio.wait_for(receive, 5))["type"] == "still.listening"
    finally:
        receive.cancel()


def _run(user, program, dataset) -> Run:
    return make_run(user, program, dataset)


@pytest.mark.django_db(transaction=True)
async def test_run_socket_stays_open_through_a_redis_stall_and_resyncs(
    settings, private_redis, user, program, demo_dataset
):
    for name, value in private_redis.settings().items():
        setattr(settings, name, value)
    run = await sync_to_async(_run)(user, program, demo_dataset)
    page = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/")
    page.scope["user"] = user
    connected, _ = await page.connect(timeout=10)
    assert connected
    assert 'id="run-status"' in await page.receive_from(timeout=5)

    private_redis.stall()
    await asyncio.sleep(CHANNEL_LAYER_SOCKET_TIMEOUT + 1.5)  # the pending read times out
    private_redis.resume()

    resync = await page.receive_from(timeout=15)  # after the capped retry delay
    assert 'id="run-status"' in resync and 'id="run-epochs"' in resync
    await get_channel_layer().group_send(run.group_name, live.message("<div id='x'>back</div>"))
    assert await page.receive_from(timeout=5) == "<div id='x'>back</div>"
    await page.disconnect()
