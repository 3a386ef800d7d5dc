"""The routes a ``fit`` in one's own code streams to (``/api/runs/from-code``,
``/api/runs/<id>/events``) keep every rule of the pages: a token's owner only, a program
checked like an import, events checked before they are stored; such a run is never resumed
or re-sent here, and it fails when its code goes quiet."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from api import tokens
from datasets.models import Dataset
from tests.training.conftest import running_run
from training.execution.liveness import reaper
from training.models import EpochLog, Run

pytestmark = pytest.mark.django_db(transaction=True)

ROWS = [
    {"inputs": {"message": f"my parcel {i} never came"}, "targets": {"team": "box"}}
    for i in range(6)
]


def post(client, token: str | None, path: str, body: dict):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(
        "/api" + path, data=json.dumps(body), content_type="application/json", **headers
    )


def start_body(saved, **more) -> dict:
    return {
        "name": "from my notebook",
        "program": saved.engine_json,
        "rows": ROWS,
        "params": {"epochs": 2, "batch_size": 2, "samples": 6, "seed": 4},
        "optimizer": {"name": "RandomFewShot", "params": {"nb_candidates": 2}},
        "reward": {"name": "ExactMatch"},
        **more,
    }


@pytest.fixture
def token(user) -> str:
    return tokens.create_token(user, "notebook")[1]


@pytest.fixture
def code_run(client, token, program) -> Run:
    answer = post(client, token, "/runs/from-code", start_body(program))
    assert answer.status_code == 201, answer.content
    return Run.objects.get(pk=answer.json()["id"])


def test_a_fit_started_from_code_is_a_run_with_its_program_and_rows(code_run, user):
    assert (code_run.owner, code_run.source, code_run.status) == (user, Run.CODE, Run.RUNNING)
    assert code_run.name == "from my notebook"
    assert code_run.config["optimizer"]["name"] == "RandomFewShot"
    assert code_run.config["training_order"] == "file_order"  # the rows as the code sent them
    assert code_run.dataset.source == Dataset.SOURCE_CODE
    assert code_run.dataset.train_count == 6
    assert code_run.dataset.input_fields[0]["name"] == "message"


def test_events_are_stored_like_a_workers_and_train_end_finishes_the_run(client, token, code_run):
    events = [
        {"type": "train_begin", "epochs": 1, "initial_epoch": 0, "steps": 3, "seed": 4},
        {"type": "batch_end", "epoch": 0, "batch": 0, "batches": 3, "logs": {}, "failures": 0},
        {"type": "epoch_end", "epoch": 0, "logs": {"reward": 0.5}},
        {
            "type": "selection",
            "variable": "generator",
            "epoch": 0,
            "candidates": 2,
            "beat_seed": 0,
            "best_gain": {"difference": 0.0, "low": -0.2, "high": 0.2, "n": 6, "id": "c1"},
        },
        {
            "type": "train_end",
            "logs": {"reward": 0.5},
            "stopped": False,
            "program": code_run.program.engine_json,
            "kept_seed": True,
        },
    ]
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": events, "usage": {}})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"stop": False, "status": Run.SUCCEEDED}
    code_run.refresh_from_db()
    assert code_run.outcome == Run.NO_BETTER
    assert code_run.trained_program_json == code_run.program.engine_json
    assert EpochLog.objects.get(run=code_run).logs == {"reward": 0.5}
    # fit had no validation split: its candidates were judged on the rows they trained on
    client.force_login(code_run.owner)
    page = client.get(f"/runs/{code_run.pk}/").content.decode()
    assert "over the starting program on the 6 training rows it was judged on" in page


def test_cancel_on_the_page_is_answered_to_the_code_and_pause_is_refused(client, token, code_run):
    assert not code_run.can_pause
    assert post(client, token, f"/runs/{code_run.pk}/pause", {}).status_code == 409
    assert post(client, token, f"/runs/{code_run.pk}/cancel", {}).status_code == 200
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": []})
    assert answer.json()["stop"] is True


def test_another_members_token_cannot_post_to_your_run(client, code_run, other_user):
    theirs = tokens.create_token(other_user, "theirs")[1]
    answer = post(client, theirs, f"/runs/{code_run.pk}/events", {"events": []})
    assert answer.status_code == 404
    assert post(client, None, f"/runs/{code_run.pk}/events", {"events": []}).status_code == 401


def test_a_run_this_dashboard_executes_takes_no_events(client, token, user, program, demo_dataset):
    run = running_run(user, program, demo_dataset)
    answer = post(client, token, f"/runs/{run.pk}/events", {"events": []})
    assert answer.status_code == 400
    assert answer.json()["field"] == "run"


def test_a_program_that_does_not_load_is_refused_and_nothing_is_kept(client, token, program):
    datasets = Dataset.objects.count()
    answer = post(client, token, "/runs/from-code", start_body(program, program={"x": 1}))
    assert answer.status_code == 400
    assert answer.json()["field"] == "program"
    assert Run.objects.count() == 0
    assert Dataset.objects.count() == datasets


def test_an_event_the_engine_does_not_send_is_refused_with_its_place(client, token, code_run):
    events = [{"type": "epoch_end", "epoch": "one"}, {"type": "rm -rf"}]
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": events})
    assert answer.status_code == 400
    assert answer.json()["field"] == "events"
    assert "events[0]" in answer.json()["detail"]
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": events[1:]})
    assert "events[0] has no known type" in answer.json()["detail"]


def test_a_quiet_run_from_code_fails_and_is_never_resumed_here(settings, code_run):
    settings.TRAINBOARD_CODE_RUN_QUIET_SECONDS = 60
    settings.TRAINBOARD_AUTO_RESUMES = 2
    Run.objects.filter(pk=code_run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert reaper.reap_stale() == []  # not a worker's run: never "worker lost"
    assert reaper.reap_quiet_code_runs() == [code_run.pk]
    code_run.refresh_from_db()
    assert code_run.status == Run.FAILED
    assert (code_run.attempt, code_run.auto_resumes) == (1, 0)
    assert "run the fit again in your code" in code_run.error
    assert not code_run.can_resume


def test_a_streamed_fit_has_its_own_request_budget(client, settings, token, code_run):
    from django.core.cache import cache

    cache.clear()
    settings.TRAINBOARD_API_RATE = "2/min"
    settings.TRAINBOARD_API_STREAM_RATE = "5/min"
    for _ in range(4):  # past the token's budget for other calls: the stream goes on
        answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": []})
        assert answer.status_code == 200
    assert post(client, token, f"/runs/{code_run.pk}/cancel", {}).status_code == 200
    assert post(client, token, f"/runs/{code_run.pk}/cancel", {}).status_code == 200
    assert post(client, token, f"/runs/{code_run.pk}/cancel", {}).status_code == 429
    assert post(client, token, f"/runs/{code_run.pk}/events", {"events": []}).status_code == 200
    assert post(client, token, f"/runs/{code_run.pk}/events", {"events": []}).status_code == 429


def finish(client, token, run: Run) -> None:
    events = [
        {"type": "train_begin", "epochs": 1, "initial_epoch": 0, "steps": 1, "seed": 4},
        {"type": "epoch_end", "epoch": 0, "logs": {"reward": 0.5}},
        {"type": "train_end", "logs": {}, "stopped": False, "program": None, "kept_seed": True},
    ]
    answer = post(client, token, f"/runs/{run.pk}/events", {"events": events})
    assert answer.json()["status"] == Run.SUCCEEDED


def test_runs_from_code_compare_like_any_other(client, token, user, program, code_run):
    finish(client, token, code_run)
    second = post(client, token, "/runs/from-code", start_body(program, name="second try"))
    finish(client, token, Run.objects.get(pk=second.json()["id"]))
    client.force_login(user)
    page = client.get(f"/compare/?runs={code_run.pk}&runs={second.json()['id']}")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"#{code_run.pk}" in text and f"#{second.json()['id']}" in text
    assert "from my notebook" in text and "second try" in text


def test_a_batch_with_a_bad_event_is_stored_not_at_all(client, token, code_run):
    events = [
        {"type": "train_begin", "epochs": 1, "initial_epoch": 0, "steps": 3, "seed": 4},
        {"type": "candidate", "variable": "v", "candidate_id": "c1", "value": "not a value"},
    ]
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": events})
    assert answer.status_code == 400
    assert "events[1] (candidate)" in answer.json()["detail"]
    code_run.refresh_from_db()
    assert code_run.batches_per_epoch == 0  # the train_begin before it was not kept either
    assert not code_run.candidates.exists()


def test_a_fit_whose_every_call_failed_ends_failed_not_succeeded(client, token, code_run):
    events = [{"type": "train_end", "logs": {}, "stopped": False, "kept_seed": True}]
    usage = {"calls": 6, "failures": 6}
    answer = post(client, token, f"/runs/{code_run.pk}/events", {"events": events, "usage": usage})
    assert answer.json()["status"] == Run.FAILED
    code_run.refresh_from_db()
    assert code_run.error == "every LM call of the fit failed (6 of 6)"
    assert code_run.outcome == ""


def test_batches_posted_together_each_keep_their_point_on_the_chart(client, token, code_run):
    events = [
        {"type": "batch_end", "epoch": 0, "batch": b, "batches": 3, "logs": {"reward": r}}
        for b, r in ((0, 0.25), (1, 0.5))
    ]
    post(client, token, f"/runs/{code_run.pk}/events", {"events": events})
    code_run.refresh_from_db()
    assert code_run.epoch_so_far["points"] == [[1, 0.25], [2, 0.5]]
    assert code_run.current_batch == 2


def test_by_hand_candidates_and_the_parity_check_are_not_offered_to_a_run_from_code(
    client, token, code_run
):
    from training.insight import plain_prompt_parity
    from training.runs import hand_candidates

    assert not hand_candidates.accepts(code_run)
    evaluation = {
        "type": "evaluation",
        "phase": "before",
        "example_rewards": [1.0, 0.0],
        "rows": ROWS[:2],
    }
    post(client, token, f"/runs/{code_run.pk}/events", {"events": [evaluation]})
    Run.objects.filter(pk=code_run.pk).update(
        status=Run.SUCCEEDED, trained_program_json=code_run.program.engine_json
    )
    code_run.refresh_from_db()
    with pytest.raises(plain_prompt_parity.ParityError, match="checked in its code"):
        plain_prompt_parity.check(code_run)


def test_settings_or_rows_not_shaped_as_the_engine_sends_are_400s(client, token, program):
    runs = Run.objects.count()
    odd = start_body(program, optimizer={"name": "X", "params": ["not", "a", "dict"]})
    answer = post(client, token, "/runs/from-code", odd)
    assert (answer.status_code, answer.json()["field"]) == (400, "params")
    rows = [{"inputs": ["a list"], "targets": {"team": "box"}}]
    answer = post(client, token, "/runs/from-code", start_body(program, rows=rows))
    assert (answer.status_code, answer.json()["field"]) == (400, "rows")
    assert Run.objects.count() == runs
