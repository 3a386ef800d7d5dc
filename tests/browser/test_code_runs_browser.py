"""A ``fit`` running in a process of its own (a user's notebook) streams into the dashboard
with ``synalinks.callbacks.RemoteMonitor``: the run appears in the runs list marked "from
code", its page fills in live as epochs end, and it reads like any other run at the end."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests

from tests.browser.helpers_runs import fits_the_width, screenshot, shell
from tests.support.waiting import until

pytestmark = pytest.mark.browser


def token_of(live_stack, username: str) -> str:
    return shell(
        live_stack,
        "from django.contrib.auth import get_user_model as g; from api import tokens;"
        f"print(tokens.create_token(g().objects.get(username={username!r}), 'notebook')[1])",
    )


def code_fit(live_stack, token: str, *args: str) -> subprocess.Popen:
    """``tests.support.code_fit`` in a process of its own, as a user's script."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.code_fit", live_stack.url, token, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def child_said(child: subprocess.Popen) -> str:
    if child.poll() is None:
        return "nothing yet (still running)"
    out, err = child.communicate()
    return f"exit {child.returncode}: {out[-500:]} {err[-1500:]}"


def runs_from_code(live_stack, token: str) -> list[dict]:
    answer = requests.get(
        live_stack.url + "api/runs/", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    return [run for run in answer.json() if run["source"] == "code"]


def test_a_fit_in_another_process_appears_live_on_its_run_page(
    logged_in_page, live_stack, tmp_path
):
    page = logged_in_page
    token = token_of(live_stack, live_stack.username)
    gate = tmp_path / "go on"
    child = code_fit(live_stack, token, "--gate", str(gate), "--epochs", "2")
    try:
        found = until(
            lambda: runs_from_code(live_stack, token),
            60,
            lambda: f"a run from code in the API's list; the script said {child_said(child)}",
            poll=0.2,
        )
        run = found[0]
        page.goto(f"/runs/{run['id']}/")
        # the fit waits inside its second epoch: the page shows it running, its first epoch
        # in the table, and the second one's first batch on the chart's line
        page.locator('#run-status .status-badge[data-status="running"]').wait_for()
        page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=30_000)
        page.locator('#history-chart[data-batch-points="1"]').wait_for(timeout=30_000)
        assert page.locator('#run-epochs tr[data-epoch="1"]').count() == 0
        assert "from code" in page.locator("#run-status").inner_text().lower()
        screenshot(page, "code-run-live")
        gate.touch()
        # the rest arrives live, without a reload: the second epoch, then the end
        page.locator('#run-epochs tr[data-epoch="1"]').wait_for(timeout=30_000)
        page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=30_000)
        # the finished run's chart has its two epochs' points and no line of an epoch under way
        page.locator('#history-chart[data-points="2"][data-batch-points="0"]').wait_for()
        out, err = child.communicate(timeout=60)
    finally:
        gate.touch()
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err[-2000:]
    assert out.strip().endswith(f"/runs/{run['id']}/")
    page.reload()
    screenshot(page, "code-run-done")
    # the evaluations made with the monitor are the run's before and after, per example
    finished = requests.get(
        live_stack.url + f"api/runs/{run['id']}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).json()
    assert finished["test_reward_before"] is not None
    assert finished["test_reward_after"] is not None
    examples = requests.get(
        live_stack.url + f"api/runs/{run['id']}/examples",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    ).json()
    assert examples["total"] == 10
    # it is in the runs list, marked
    page.goto("/runs/")
    row = page.locator(f'tr[data-run="{run["id"]}"]')
    assert "from code" in row.first.inner_text().lower()
    # and both read at phone width: the mark beside the status, nothing wider than the screen
    page.set_viewport_size({"width": 390, "height": 900})
    for path in ("/runs/", f"/runs/{run['id']}/"):
        page.goto(path)
        # the run page's socket may swap the status in again as it connects: wait on the
        # mark as drawn, not on the element found first
        page.wait_for_function(
            "() => { const m = document.querySelector('.run-source');"
            " if (!m) return false; const r = m.getBoundingClientRect();"
            " return r.width > 0 && r.right <= 390; }"
        )
        assert fits_the_width(page), path
        screenshot(page, f"code-run-390{path.replace('/', '-')}")
