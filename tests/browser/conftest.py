"""Browser tests share one live stack (and its two worker processes) for the session: each
test starts with an idle worker, whatever the test before it left running after a failure."""

from __future__ import annotations

import pytest
from helpers_runs import shell

from tests.support.waiting import until

CANCEL_ACTIVE_RUNS = """
from training.models import Run
from training.runs.launch import request_cancel
for run in Run.objects.filter(status__in=Run.ACTIVE):
    request_cancel(run)
print(Run.objects.filter(status__in=Run.ACTIVE).count())
"""
COUNT_ACTIVE_RUNS = (
    "from training.models import Run;print(Run.objects.filter(status__in=Run.ACTIVE).count())"
)


@pytest.fixture(autouse=True)
def idle_worker_after(request):
    """After each browser test, cancel the runs it left queued or running (a test that failed
    before its own Cancel) and wait, up to 60 s, until the worker has let them go."""
    yield
    if "live_stack" not in request.fixturenames:
        return
    live_stack = request.getfixturevalue("live_stack")
    if shell(live_stack, CANCEL_ACTIVE_RUNS) == "0":
        return
    until(
        lambda: shell(live_stack, COUNT_ACTIVE_RUNS) == "0",
        60,
        "the worker let the cancelled runs go",
        poll=1,
    )
