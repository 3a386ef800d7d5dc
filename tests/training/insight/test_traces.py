"""LM call traces of a run: what a run stores (roles, splits, candidates, bounds, no secrets),
the pages that show them (filters, errors grouped by message, escaping), every candidate
listed, and that only the owner sees any of it."""

from __future__ import annotations

import concurrent.futures
import json
import threading

import pytest
from django.db import connection
from django.urls import reverse

from datasets.services import get_split
from tests.support.fake_models import XSS_PAYLOAD
from tests.training.conftest import executed_run, make_program, make_run, run_config
from training.engine import tracing
from training.execution import events
from training.execution.recording import traces
from training.models import Candidate, LMCallTrace, Run

pytestmark = pytest.mark.django_db(transaction=True)


def executed(user, dataset, model="fake/fewshot", instructions="Route it.", **overrides):
    program = make_program(user, dataset, model=model, instructions=instructions)
    return executed_run(user, program, dataset, **overrides)


def test_a_run_stores_every_call_with_its_role_split_example_and_candidate(user, demo_dataset):
    run = executed(user, demo_dataset)
    rows = list(LMCallTrace.objects.filter(run=run))
    assert rows and run.traces_dropped == 0
    assert [row.seq for row in rows] == list(range(1, len(rows) + 1))
    assert {row.role for row in rows} == {"prediction"}
    assert {row.split for row in rows} == {"train", "validation", "test"}
    test_rows = [row for row in rows if row.split == "test"]
    assert {row.phase for row in test_rows} == {"before", "after", "samples"}
    test_size = len(get_split(demo_dataset, "test")[0])
    before = sorted(row.example_index for row in test_rows if row.phase == "before")
    assert before == list(range(test_size))
    # every candidate was scored on the validation split, and its predictions say so
    scored = {c.candidate_id for c in Candidate.objects.filter(run=run)}
    validation_candidates = {row.candidate_id for row in rows if row.split == "validation"}
    assert scored <= validation_candidates | {""}
    assert any(row.memo_hit for row in rows)  # re-scoring unchanged variables
    real = [row for row in rows if not row.memo_hit]
    assert len(real) == run.lm_calls
    call = real[0]
    assert call.messages[0]["role"] == "system" and "Route it." in call.messages[0]["content"]
    assert json.loads(call.response) == json.loads(call.parsed)
    assert call.latency >= 0 and call.attempts == 1 and call.prompt_tokens > 0


def test_failed_calls_are_stored_with_their_error(user, demo_dataset):
    run = executed(user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal")
    failed = LMCallTrace.objects.filter(run=run, failed=True)
    assert failed.count() == run.lm_failures
    assert all("simulated non-retryable failure" in row.error for row in failed)
    assert all(row.response is None and row.parsed is None for row in failed)


def test_the_run_cap_keeps_the_first_calls_and_counts_the_rest(settings, user, demo_dataset):
    settings.TRAINBOARD_TRACE_MAX_CALLS = 10
    settings.TRAINBOARD_TRACE_MAX_CHARS = 40
    run = executed(user, demo_dataset)
    rows = list(LMCallTrace.objects.filter(run=run))
    assert [row.seq for row in rows] == list(range(1, 11))
    total = run.lm_calls + run.usage["memo_hits"]
    assert run.traces_dropped == total - 10
    limit = 40 + len("… [99999 more characters]")
    for row in rows:
        assert all(len(message["content"]) <= limit for message in row.messages)
        assert len(row.response or "") <= limit


def test_secrets_never_reach_the_database(user, demo_dataset):
    key = "sk-proj-0123456789abcdefghijklmnop"
    run = executed(user, demo_dataset, instructions=f"Route it. Authorization: Bearer {key}")
    stored = json.dumps(list(LMCallTrace.objects.filter(run=run).values()), default=str)
    assert key not in stored and "0123456789abcdef" not in stored
    assert tracing.REDACTED in stored


def test_a_superseded_attempt_stores_no_trace(user, program, demo_dataset):
    run = make_run(user, program, demo_dataset, status="running")
    superseded = threading.Event()
    writer = traces.TraceWriter(run.pk, attempt=run.attempt + 1, superseded=superseded)
    writer._write([tracing.CallTrace(seq=1, model="m")], dropped=0)
    assert not LMCallTrace.objects.filter(run=run).exists() and superseded.is_set()
    writer = traces.TraceWriter(run.pk, attempt=run.attempt)
    writer._write([tracing.CallTrace(seq=1, model="m")], dropped=3)
    run.refresh_from_db()
    assert LMCallTrace.objects.filter(run=run).count() == 1 and run.traces_dropped == 3


# -- pages -----------------------------------------------------------------------------------


def test_trace_list_filters_by_role_candidate_failed_and_example(client, user, demo_dataset):
    run = executed(user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal")
    client.force_login(user)
    url = reverse("training:trace-list", args=[run.pk])

    def shown(**query):
        response = client.get(url, query)
        assert response.status_code == 200
        return response.context["page"].paginator.count, response

    total, _ = shown()
    assert total == LMCallTrace.objects.filter(run=run).count()
    failed, response = shown(failed="1")
    assert failed == run.lm_failures > 0
    assert all(row.failed for row in response.context["page"].object_list)
    candidate = LMCallTrace.objects.filter(run=run).exclude(candidate_id="").first().candidate_id
    count, response = shown(candidate=candidate, role="prediction")
    assert count == LMCallTrace.objects.filter(run=run, candidate_id=candidate).count()
    assert {row.candidate_id for row in response.context["page"].object_list} == {candidate}
    count, _ = shown(role="judge")
    assert count == 0
    count, response = shown(split="test", example="2", phase="before")
    assert count == 1 and response.context["page"].object_list[0].example_index == 2
    _, response = shown(role="nonsense", example="x")
    assert response.context["page"].paginator.count == total
    assert "role &#x27;nonsense&#x27; is not one of" in response.content.decode()


def test_run_page_groups_errors_by_message_and_links_to_their_traces(client, user, demo_dataset):
    run = executed(user, demo_dataset, model="fake/fewshot?failure_rate=0.3&failure=fatal")
    client.force_login(user)
    html = client.get(reverse("training:run-detail", args=[run.pk])).content.decode()
    [group] = client.get(reverse("training:run-detail", args=[run.pk])).context["error_groups"]
    assert group["count"] == run.lm_failures
    assert "simulated non-retryable failure" in group["error"]
    assert f'href="/runs/{run.pk}/traces/?{group["query"].replace("&", "&amp;")}"' in html
    response = client.get(reverse("training:trace-list", args=[run.pk]) + "?" + group["query"])
    assert response.context["page"].paginator.count == run.lm_failures


def test_an_lm_answer_is_shown_escaped_in_the_trace_viewer(client, user, demo_dataset):
    run = executed(user, demo_dataset, model="fake/xss")
    client.force_login(user)
    trace = LMCallTrace.objects.filter(run=run, memo_hit=False).first()
    assert XSS_PAYLOAD in trace.response
    for url in (trace.get_absolute_url(), reverse("training:trace-list", args=[run.pk])):
        html = client.get(url).content.decode()
        assert "<script>window.__xss" not in html, url
        assert "&lt;script&gt;window.__xss" in html, url


def test_others_get_404_on_traces_and_candidates(client, user, other_user, demo_dataset):
    run = executed(user, demo_dataset)
    trace = LMCallTrace.objects.filter(run=run).first()
    client.force_login(other_user)
    for url in (
        reverse("training:trace-list", args=[run.pk]),
        reverse("training:trace-detail", args=[run.pk, trace.pk]),
        reverse("training:candidate-list", args=[run.pk]),
    ):
        assert client.get(url).status_code == 404, url
    # a trace of one run is not reachable through another run of the owner
    client.force_login(user)
    other_run = executed(user, demo_dataset)
    assert (
        client.get(reverse("training:trace-detail", args=[other_run.pk, trace.pk])).status_code
        == 404
    )


def test_the_leaderboard_lists_every_candidate_and_pages_the_full_list(
    client, user, program, demo_dataset
):
    run = make_run(user, program, demo_dataset)
    for index in range(17):
        Candidate.objects.create(
            run=run,
            variable="generator/state",
            candidate_id=f"c{index + 1}",
            reward=index / 20,
            value={},
        )
    client.force_login(user)
    html = client.get(reverse("training:run-detail", args=[run.pk])).content.decode()
    assert html.count('class="candidate status-') == 17 and "Top 15" not in html
    assert f"/runs/{run.pk}/traces/?candidate=c17&amp;role=prediction" in html
    for index in range(17, 120):
        Candidate.objects.create(
            run=run, variable="generator/state", candidate_id=f"c{index + 1}", value={}
        )
    html = client.get(reverse("training:run-detail", args=[run.pk])).content.decode()
    assert f'href="/runs/{run.pk}/candidates/" id="all-candidates">all 120 candidates' in html
    pages = [
        client.get(reverse("training:candidate-list", args=[run.pk]), {"page": page})
        for page in (1, 2, 3)
    ]
    seen = [c.candidate_id for page in pages for c in page.context["page"].object_list]
    assert len(seen) == len(set(seen)) == 120
    assert seen[0] == "c17"  # best first


class _MidRunReader:
    """An ``events`` listener that reads the run page's three LM call counts each time the
    worker stores a batch or an epoch end, while the worker's event loop waits on it (so
    nothing is written meanwhile): the run observed mid-run, as a page read would see it."""

    def __init__(self):
        self.seen: list[tuple[str, int, str, int]] = []

    def on_changed(self, run, kinds, **extra):
        pass

    def on_row_changed(self, run_id, kinds):
        pass

    async def on_stored(self, group, run, kinds, **extra):
        from training.insight.sections import registry

        changed = [section.name for section in registry.changed_by(kinds)]
        if "usage" not in changed or not run.is_active:
            return
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the ORM, off the event loop
            self.seen.append(pool.submit(self._read, run.pk).result())

    @staticmethod
    def _read(run_id):
        from training.execution import forecast_text
        from training.insight import trace_reads

        try:
            run = Run.objects.get(pk=run_id)
            actual = next(row["actual"] for row in forecast_text.comparison(run))
            return run.status, run.lm_calls, actual, trace_reads.trace_summary(run)["trace_total"]
        finally:
            connection.close()


def test_mid_run_the_forecast_the_usage_and_the_traces_count_the_same_calls(user, demo_dataset):
    from training.execution import attempt as execution

    program = make_program(user, demo_dataset, model="fake/fewshot?latency=0.002")
    run = make_run(
        user, program, demo_dataset, run_config(epochs=2, batch_size=4, evaluations_before=1)
    )
    Run.objects.filter(pk=run.pk).update(forecast={"calls": {"expected": 9, "low": 9, "high": 9}})
    reader = _MidRunReader()
    events.listen(reader)
    try:
        assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    finally:
        events._listeners.remove(reader)
    assert len(reader.seen) >= 4 and reader.seen[-1][1] > reader.seen[0][1] > 0
    for status, calls, forecast_actual, traced in reader.seen:
        assert (status, forecast_actual, traced) == ("running", str(calls), calls)
