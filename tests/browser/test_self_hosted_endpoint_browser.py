"""A program on a self-hosted model server, from the browser, on the embedded defaults (no
administrator setting): llama.cpp's OpenAI-compatible server on loopback (tests/llama_server.py)
saved as an endpoint in Settings, tested there, picked by a program, trained with RandomFewShot
for one epoch on a 4+2-row dataset; the per-example table and the traces show its answers.

``ENDPOINT_SHOTS=<folder>`` keeps screenshots at 1280 and 390 px.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers_runs import open_advanced, tiny_dataset_id
from playwright.sync_api import expect

from tests.llama_server import llama_server_fixture  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow]
WIDTHS = (1280, 390)


def shoot(page, name: str) -> None:
    """No horizontal page scroll at either width; screenshots under $ENDPOINT_SHOTS if set."""
    folder = os.environ.get("ENDPOINT_SHOTS")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, f"{page.url} is {scroll} px wide at {width} px"
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{folder}/{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def log_sizes(live_stack) -> dict[str, int]:
    return {
        name: (live_stack.stack.log_dir / f"{name}.log").stat().st_size
        for name in ("web", "worker")
    }


def assert_no_traceback_since(live_stack, offsets: dict[str, int]) -> None:
    """The web and worker logs of this test hold no traceback, and no console error."""
    for name, offset in offsets.items():
        with open(live_stack.stack.log_dir / f"{name}.log", "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
        assert "Traceback" not in text, f"{name}.log: {text[-3000:]}"


def test_a_program_on_a_loopback_llama_cpp_server_trains_end_to_end(
    logged_in_page, live_stack, llama_server
):
    page = logged_in_page
    offsets = log_sizes(live_stack)
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    dataset_id = tiny_dataset_id(live_stack)
    # Settings → Endpoints: save the server, test the connection.
    page.goto("/settings/")
    page.locator("#endpoint-form").wait_for()
    expect(page.locator("#allow-private")).to_have_text("allowed")  # the embedded default
    page.fill("#id_name", "llama.cpp here")
    page.fill("#id_url", llama_server.url)
    page.select_option("#id_structured_output", "json_object")
    page.click("#endpoint-form button[type=submit]")
    row = page.locator("#endpoint-table tbody tr", has_text="llama.cpp here")
    expect(row).to_contain_text("none")  # no key
    row.locator(".test-connection").click()
    expect(page.locator(".connection-test")).to_contain_text("Connected. 1 model served: smollm2")
    shoot(page, "settings-endpoints")
    # A program on that endpoint.
    page.goto("/programs/new/")
    page.fill("#id_name", "Self-hosted router")
    page.select_option("#id_dataset", str(dataset_id))
    page.fill("#id_instructions", "Answer with the team code name: ledger, wrench or parcel.")
    page.fill("#id_model", "openai/smollm2")
    page.select_option("#id_endpoint", label="llama.cpp here")
    page.fill("#id_max_tokens", "24")
    shoot(page, "program-form")
    page.click("#program-form button[type=submit]")
    page.wait_for_url("**/programs/*/")
    expect(page.locator("main")).to_contain_text(llama_server.url)
    # Launch: RandomFewShot, one epoch, one evaluation before and after.
    page.click("#launch-run")
    page.select_option("#id_optimizer", "RandomFewShot")
    page.fill("#id_epochs", "1")
    page.fill("#id_batch_size", "4")
    page.fill("#id_validation_split", "0")
    open_advanced(page)
    page.fill("#id_evaluations_before", "1")
    page.fill("#id_evaluations_after", "1")
    page.click("#launch")
    page.wait_for_url("**/runs/*/")
    run_id = int(page.url.rstrip("/").split("/")[-1])
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=120_000)
    assert int(page.locator("#usage-calls").inner_text()) > 0
    # The per-example table: both test examples, each with the answer after training.
    rows = page.locator("#eval-rows tr.eval-row")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".eval-after")).not_to_be_empty()
    shoot(page, "run")
    # The traces: the server's answers, the endpoint's address, never a key.
    page.goto(f"/runs/{run_id}/traces/?role=prediction")
    traces = page.locator("#trace-table tr.trace")
    assert traces.count() > 0
    traces.first.locator("a.trace-link").click()
    page.wait_for_url(f"**/runs/{run_id}/traces/*/")
    expect(page.locator("#trace-response")).not_to_be_empty()
    assert "openai/smollm2" in page.locator("main").inner_text()
    shoot(page, "trace")
    assert console_errors == []
    assert_no_traceback_since(live_stack, offsets)
