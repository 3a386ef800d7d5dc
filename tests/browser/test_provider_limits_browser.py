"""Two runs on two Celery worker processes share one provider's limit.

A real OpenAI-compatible server on loopback (tests/openai_server.py) answers 429 past
``LIMIT`` requests in flight and records the most it saw at once. A live stack of its own (its
own Celery queue, a worker with two processes, the session's Redis and database server) is
told the provider's limit (``TRAINBOARD_PROVIDER_LIMITS``: ``LIMIT`` in flight for that model
at that endpoint). Each run's model allows 8 requests at once of its own, so the two together
would send 16: the shared Redis limit keeps the server at ``LIMIT``, no request is refused,
both runs finish, and their pages say "waiting for the provider's rate limit" meanwhile.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the screenshots.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from helpers_runs import (
    demo_dataset_id,
    fits_the_width,
    launch_run,
    run_field,
    screenshot,
    shell,
)

from tests.conftest import session_cookie, start_live_stack
from tests.openai_server import OpenAIServer
from tests.support.waiting import until

pytestmark = pytest.mark.browser

LIMIT = 3
MODEL = "openai/test-model"
ANSWER = json.dumps({"team": "money"})
RUN = {"epochs": 1, "batch_size": 6, "evaluations_before": 1, "evaluations_after": 1}


@pytest.fixture(scope="module")
def provider():
    with OpenAIServer(limit=LIMIT, latency=0.15, content=ANSWER, retry_after=1) as server:
        yield server


@pytest.fixture(scope="module")
def limited_stack(provider):
    """A live stack whose workers know the provider's limit, on a Celery queue of its own
    (the session's live stack, if any, never takes its runs)."""
    var_dir = Path(tempfile.mkdtemp(prefix="tb-limits-"))
    limits = {f"{MODEL}@{provider.api_base}": {"in_flight": LIMIT}}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRAINBOARD_PROVIDER_LIMITS", json.dumps(limits))
        env.setenv("OPENAI_API_KEY", "sk-test-local-server-only")
        env.setenv("TRAINBOARD_CELERY_QUEUE", f"limits-{uuid.uuid4().hex[:12]}")
        live, stop = start_live_stack(var_dir, concurrency=2)
    try:
        yield live
    finally:
        stop()
        shutil.rmtree(var_dir, ignore_errors=True)


#: Notes on the page whether the run's status ever said it waits for the provider's limit.
SEEN_NOTICE = """
window.rateLimitedSeen = false;
new MutationObserver(() => {
  const notice = document.querySelector('#run-status .run-rate-limited');
  if (notice && !window.rateLimitedSeen) {
    window.rateLimitedSeen = true;
    window.rateLimitedText = notice.textContent;
    window.rateLimitedPhase = document.querySelector('#run-status .run-phase').textContent;
  }
}).observe(document, {childList: true, subtree: true});
"""


def program_on_provider(stack, provider, name: str, dataset_id: int) -> int:
    """A program on the local server, saved as an endpoint, created as the program form does."""
    code = f"""
from django.contrib.auth import get_user_model
from datasets.models import Dataset
from training.models import Program
from training.programs import saved_endpoints
from training.programs.programs import build_engine_program
user = get_user_model().objects.get(username='tester')
dataset = Dataset.objects.get(pk={dataset_id})
if saved_endpoints.resolve(user, 'limited server') is None:  # loopback: a saved endpoint
    saved_endpoints.save(user, 'limited server', {provider.api_base!r})
engine = build_engine_program(name={name!r}, input_fields=dataset.input_schema_fields(),
    target_fields=dataset.target_schema_fields(), module='Generator', instructions='Route it.',
    model={MODEL!r}, api_base={provider.api_base!r}, endpoint='limited server')
program = Program.objects.create(owner=user, name={name!r}, dataset=dataset, module='Generator',
    instructions='Route it.', model={MODEL!r}, api_base={provider.api_base!r},
    engine_json=engine.get_config())
print(program.pk)
"""
    return int(shell(stack, code))


def logged_in(browser, stack, width: int):
    context = browser.new_context(base_url=stack.url, viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    context.add_cookies([session_cookie(stack)])
    return context, context.new_page()


def test_two_runs_on_two_workers_share_the_providers_limit(browser, limited_stack, provider):
    stack = limited_stack
    dataset_id = demo_dataset_id(stack)
    runs = [
        launch_run(stack, program_on_provider(stack, provider, name, dataset_id), dataset_id, **RUN)
        for name in ("Limited A", "Limited B")
    ]
    contexts = []
    try:
        pages = []
        for run_id, width in zip(runs, (1280, 390), strict=True):
            context, page = logged_in(browser, stack, width)
            contexts.append(context)
            page.add_init_script(SEEN_NOTICE)
            page.goto(f"/runs/{run_id}/")
            pages.append(page)
        for page, width in zip(pages, (1280, 390), strict=True):
            # Each page said so, live, while its run waited (the notice comes and goes).
            page.wait_for_function("() => window.rateLimitedSeen === true", timeout=60_000)
            text = page.evaluate("window.rateLimitedText")
            assert "waiting for the provider's rate limit" in text
            assert page.evaluate("window.rateLimitedPhase") == "rate limited"
            assert fits_the_width(page), width
            if page.locator("#run-status .run-rate-limited").is_visible():
                screenshot(page, f"run-rate-limited-{width}")  # while it says so

        def ended() -> list | None:
            found = [run_field(stack, run_id, "status") for run_id in runs]
            return found if all(status not in ("queued", "running") for status in found) else None

        statuses = until(ended, 240, "every run ended", poll=1)
    finally:
        for context in contexts:
            context.close()

    assert statuses == ["succeeded", "succeeded"], [run_field(stack, r, "error") for r in runs]
    assert provider.max_in_flight == LIMIT  # reached, never passed, by both runs together
    assert provider.refused == []
    # The runs overlapped in time: each ran in its own worker process all along.
    spans = [(run_field(stack, r, "started_at"), run_field(stack, r, "finished_at")) for r in runs]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    for log in ("worker.log", "web.log"):
        assert "Traceback" not in (Path(stack.stack.log_dir) / log).read_text(errors="replace")
