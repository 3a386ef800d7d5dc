"""Every broker operation of a request is bounded.

A Celery app configured exactly as settings configure it (``project.redis_config.derive``),
on a private Redis that the test stalls with SIGSTOP: publishing a task and pinging the
workers must give up within a few seconds instead of blocking forever.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from celery import Celery

from project.redis_config import COMMAND_TIMEOUT, RETRY_POLICY
from tests.private_redis import private_redis_fixture  # noqa: F401  (fixture "private_redis")

# One try plus the retries, each a command timeout, plus the pauses between them.
PUBLISH_BOUND = (RETRY_POLICY["max_retries"] + 1) * (COMMAND_TIMEOUT + 1.0) + 2.0


@pytest.fixture
def celery_app(private_redis):
    app = Celery("timeouts-test", set_as_current=False)
    app.config_from_object(SimpleNamespace(**private_redis.settings()), namespace="CELERY")
    yield app
    app.close()


def test_publishing_a_task_fails_fast_when_redis_is_stalled(celery_app, private_redis):
    """A launch's publish, as settings configure it (results ignored: no result-store
    subscribe), gives up within its retry policy."""
    assert celery_app.conf.task_ignore_result is True
    private_redis.stall()
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        celery_app.send_task(
            "trainboard.never.runs",
            queue="timeouts-test",
            ignore_result=celery_app.conf.task_ignore_result,
        )
    elapsed = time.monotonic() - started
    assert elapsed < PUBLISH_BOUND, f"publish blocked {elapsed:.1f} s ({raised.value!r})"


def test_pinging_workers_gives_up_when_redis_is_stalled(celery_app, private_redis):
    private_redis.stall()
    started = time.monotonic()
    try:
        replies = celery_app.control.ping(timeout=1.0)
    except Exception:  # a timeout is the expected way out; an empty answer is too
        replies = []
    elapsed = time.monotonic() - started
    assert replies == []
    assert elapsed < PUBLISH_BOUND, f"ping blocked {elapsed:.1f} s"
