"""A Channels send failure (Redis gone for a moment) fails neither the run nor the page."""

from __future__ import annotations

import pytest

from tests.training.conftest import executed_run, make_run
from training.insight import live
from training.models import EpochLog, Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)


class _BrokenLayer:
    def __init__(self):
        self.calls = 0

    async def group_send(self, group, message):
        self.calls += 1
        raise ConnectionError("Redis went away for a moment")


def test_a_channel_layer_error_does_not_fail_the_run(
    user, program, demo_dataset, monkeypatch, caplog
):
    layer = _BrokenLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    run = executed_run(user, program, demo_dataset)
    assert run.status == Run.SUCCEEDED and run.error == ""
    assert EpochLog.objects.filter(run=run).count() == 1
    assert layer.calls > 3
    assert "Redis went away" in caplog.text


def test_web_side_broadcasts_survive_a_channel_layer_error(
    user, program, demo_dataset, monkeypatch
):
    monkeypatch.setattr(live, "get_channel_layer", lambda: _BrokenLayer())
    run = make_run(user, program, demo_dataset)
    run = runs.request_cancel(run)
    assert run.status == Run.CANCELLED
