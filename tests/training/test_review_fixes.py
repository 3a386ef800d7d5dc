"""Regression tests for the runs-dashboard review findings (S1, C2-C5).

S1: an imported or stored program JSON must not choose where the LM cache lives (nor
unbounded LM settings). C2: an attempt superseded while its worker is alive stops and
writes nothing. C3: cancel racing the worker's claim still cancels. C4: a resume drops the
rows of the abandoned partial epoch. C5: a Channels send failure does not fail the run.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.db.models.query import QuerySet
from django.urls import reverse
from django.utils import timezone

from training.models import Candidate, EpochLog, OptimizerError, Program, Run
from training.services import execution, live, runs
from training.services.persistence import PersistenceCallback
from training.services.programs import parse_import, sanitize_engine_json

from .conftest import make_program, run_config

pytestmark = pytest.mark.django_db(transaction=True)


def _language_model_configs(document):
    """Every serialised language model config in an engine document."""
    found = []

    def walk(node, key=None):
        if isinstance(node, dict):
            if key == "language_model" and isinstance(node.get("config"), dict):
                found.append(node["config"])
            for child_key, child in node.items():
                walk(child, child_key)
        elif isinstance(node, list):
            for child in node:
                walk(child, key)

    walk(document)
    return found


def _hostile(document, cache):
    document = copy.deepcopy(document)
    configs = _language_model_configs(document)
    assert configs, "the fixture program has a language model"
    for config in configs:
        config.update(cache=cache, timeout=None, retries=1000, max_concurrency=10_000)
    return document


# -- S1: the LM cache location is never chosen by a document ---------------------------------


def test_import_with_a_disk_cache_path_creates_nothing_and_stores_cache_false(
    client_user, user, program, tmp_path
):
    target = tmp_path / "x" / "nested"
    raw = json.dumps(_hostile(program.engine_json, f"disk:{target}")).encode()

    document, _ = parse_import(raw)
    assert not target.exists()
    (config,) = _language_model_configs(document)
    assert config["cache"] is False
    assert config["timeout"] == 600.0 and config["retries"] == 10
    assert config["max_concurrency"] == 32

    upload = SimpleUploadedFile("evil.json", raw, content_type="application/json")
    response = client_user.post(reverse("training:program-import"), {"file": upload})
    assert response.status_code == 302
    imported = Program.objects.get(owner=user, source=Program.SOURCE_IMPORT)
    assert [c["cache"] for c in _language_model_configs(imported.engine_json)] == [False]
    assert not target.exists()


def test_a_redis_cache_url_is_dropped_too():
    document = {
        "judge": {
            "class_name": "synalinks>LanguageModel",
            "config": {"model": "openai/x", "cache": "redis://attacker:6379/0"},
        },
        "embedding_model": {
            "class_name": "synalinks>EmbeddingModel",
            "config": {"model": "openai/e", "retries": -1, "max_concurrency": 0},
        },
    }
    clean = sanitize_engine_json(document)
    assert clean["judge"]["config"]["cache"] is False
    assert clean["judge"]["config"]["timeout"] == 600.0  # absent: not unlimited either
    assert clean["embedding_model"]["config"] == {
        "model": "openai/e",
        "retries": 0,
        "max_concurrency": 1,
    }
    assert "cache" not in clean["embedding_model"]["config"]  # EmbeddingModel takes none
    assert document["judge"]["config"]["cache"] == "redis://attacker:6379/0"  # a copy


def test_worker_ignores_a_cache_path_in_stored_program_json(user, program, demo_dataset, tmp_path):
    """A program imported before the check existed: the worker sanitises at load too."""
    target = tmp_path / "worker" / "nested"
    Program.objects.filter(pk=program.pk).update(
        engine_json=_hostile(program.engine_json, f"disk:{target}")
    )
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(epochs=1, evaluations_before=1, evaluations_after=1),
    )
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    assert not target.exists()
    assert [c["cache"] for c in _language_model_configs(run.trained_program_json)] == [False]
    assert [c["cache"] for c in _language_model_configs(run.checkpoint_json)] == [False]


# -- C2: a superseded attempt stops and writes nothing ---------------------------------------


class _Program:
    stop_training = False
    failed_predictions = 0

    def get_config(self):
        return {"checkpoint": "from the superseded attempt"}


class _Tracker:
    def to_dict(self):
        return {}


def _running(user, program, dataset, **fields):
    return Run.objects.create(
        owner=user,
        program=program,
        dataset=dataset,
        config=run_config(),
        status=Run.RUNNING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        **fields,
    )


def _events(epoch=1):
    return [
        {"type": "epoch_begin", "epoch": epoch, "epochs": 3},
        {"type": "batch_end", "epoch": epoch, "batch": 0, "batches": 4, "logs": {}},
        {
            "type": "candidate",
            "epoch": epoch,
            "variable": "generator/state",
            "candidate_id": "c2",
            "parent_ids": ["c1"],
            "operation": "few_shot",
            "value": {"instructions": "stale"},
            "reward": 1.0,
            "novelty": None,
            "status": "scored",
        },
        {
            "type": "optimizer_error",
            "epoch": epoch,
            "variable": "generator/state",
            "operation": "mutation",
            "error": "stale",
        },
        {"type": "epoch_end", "epoch": epoch, "logs": {"reward": 1.0}},
    ]


def _resumed_elsewhere(run):
    """What the reaper + a resume + the new attempt's claim leave in the row."""
    Run.objects.filter(pk=run.pk).update(
        attempt=2, status=Run.RUNNING, current_batch=0, current_epoch=1, checkpoint_epoch=0
    )


async def _feed(callback, events):
    for event in events:
        await callback.on_event(event)


def test_superseded_attempt_callback_stops_training_and_writes_nothing(user, program, demo_dataset):
    run = _running(user, program, demo_dataset)
    callback = PersistenceCallback(run.pk, 1, run.group_name, _Tracker(), {})
    fake = _Program()
    callback.set_program(fake)
    _resumed_elsewhere(run)

    asyncio.run(_feed(callback, _events()))

    assert fake.stop_training is True and callback.superseded.is_set()
    assert not Candidate.objects.filter(run=run).exists()
    assert not OptimizerError.objects.filter(run=run).exists()
    assert not EpochLog.objects.filter(run=run).exists()
    run.refresh_from_db()
    assert (run.attempt, run.current_batch, run.current_epoch) == (2, 0, 1)
    assert run.checkpoint_json is None and run.checkpoint_epoch == 0


def test_a_reaped_attempt_stops_too(user, program, demo_dataset):
    run = _running(user, program, demo_dataset)
    callback = PersistenceCallback(run.pk, 1, run.group_name, _Tracker(), {})
    fake = _Program()
    callback.set_program(fake)
    Run.objects.filter(pk=run.pk).update(status=Run.FAILED, error="failed: worker lost (test)")

    asyncio.run(_feed(callback, _events(epoch=0)))

    assert fake.stop_training is True
    assert not EpochLog.objects.filter(run=run).exists()
    assert not Candidate.objects.filter(run=run).exists()


def test_the_heartbeat_notices_a_superseded_attempt_and_the_callback_obeys(
    user, program, demo_dataset
):
    run = _running(user, program, demo_dataset)
    heartbeat = execution.Heartbeat(run.pk, 1)
    assert heartbeat.beat() and not heartbeat.superseded.is_set()
    _resumed_elsewhere(run)
    assert heartbeat.beat() and heartbeat.superseded.is_set()

    callback = PersistenceCallback(
        run.pk, 1, run.group_name, _Tracker(), {}, superseded=heartbeat.superseded
    )
    fake = _Program()
    callback.set_program(fake)
    asyncio.run(_feed(callback, _events()[2:3]))  # a candidate event, no batch_end first
    assert fake.stop_training is True
    assert not Candidate.objects.filter(run=run).exists()


def test_a_locked_database_makes_the_heartbeat_retry_not_raise(
    user, program, demo_dataset, monkeypatch, caplog
):
    run = _running(user, program, demo_dataset)
    heartbeat = execution.Heartbeat(run.pk, 1)
    real_update = QuerySet.update
    monkeypatch.setattr(
        QuerySet,
        "update",
        lambda self, **kw: (_ for _ in ()).throw(OperationalError("database is locked")),
    )
    assert heartbeat.beat() is False
    assert not heartbeat.superseded.is_set()  # locked is not "superseded"
    assert "database is locked" in caplog.text
    monkeypatch.setattr(QuerySet, "update", real_update)
    assert heartbeat.beat() is True and not heartbeat.superseded.is_set()


def test_a_running_worker_stops_when_its_run_is_resumed_elsewhere(user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/fewshot?latency=0.02")
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(epochs=50, evaluations_before=0),
    )
    result = {}
    worker = threading.Thread(target=lambda: result.update(status=execution.execute(run.pk, 1)))
    worker.start()
    deadline = time.monotonic() + 30
    while not EpochLog.objects.filter(run=run).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # Reaped as "worker lost" while alive, then resumed: the row now belongs to attempt 2.
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, attempt=2, error="")
    counts = (
        EpochLog.objects.filter(run=run).count(),
        Candidate.objects.filter(run=run).count(),
        OptimizerError.objects.filter(run=run).count(),
    )
    worker.join(30)
    assert not worker.is_alive()
    assert result["status"] == "superseded"
    assert counts == (
        EpochLog.objects.filter(run=run).count(),
        Candidate.objects.filter(run=run).count(),
        OptimizerError.objects.filter(run=run).count(),
    )
    run.refresh_from_db()
    assert (run.status, run.attempt, run.error) == (Run.QUEUED, 2, "")
    assert counts[0] < 50


# -- C3: cancel racing the worker's claim -----------------------------------------------------


def test_cancel_of_a_run_claimed_meanwhile_still_reaches_the_worker(user, program, demo_dataset):
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    seen_by_the_view = Run.objects.get(pk=run.pk)
    assert seen_by_the_view.status == Run.QUEUED
    assert execution.claim(run.pk, run.attempt, "w@host")  # the worker wins the race

    runs.request_cancel(seen_by_the_view)

    run.refresh_from_db()
    assert run.status == Run.RUNNING and run.cancel_requested is True
    assert execution._cancel_requested(run.pk)


def test_cancel_of_a_queued_run_is_still_immediate(user, program, demo_dataset):
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.CANCELLED and run.cancel_requested and run.finished_at
    assert execution.execute(run.pk, run.attempt) == "skipped"


def test_cancel_leaves_a_finished_run_alone(user, program, demo_dataset):
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(),
        status=Run.SUCCEEDED,
    )
    runs.request_cancel(run)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and not run.cancel_requested


# -- C4: resume drops the abandoned partial epoch's rows --------------------------------------


def test_resume_deletes_candidates_and_errors_of_the_unfinished_epoch(user, program, demo_dataset):
    run = Run.objects.create(
        owner=user, program=program, dataset=demo_dataset, config=run_config(epochs=1)
    )
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.checkpoint_epoch == 0
    kept = set(Candidate.objects.filter(run=run).values_list("candidate_id", flat=True))
    assert kept
    state = run.checkpoint_json["compile"]["optimizer"]["state"]
    next_id = f"c{int(state['candidate_count']) + 1}"
    ghost = {"instructions": "ghost of the abandoned epoch"}
    for candidate_id in (next_id, "c999"):  # one the resumed run reuses, one it never does
        Candidate.objects.create(
            run=run,
            variable="generator/state",
            candidate_id=candidate_id,
            operation="few_shot",
            value=ghost,
            reward=1.0,
            status="scored",
            epoch=1,
        )
    OptimizerError.objects.create(
        run=run, epoch=1, variable="generator/state", operation="mutation", error="ghost"
    )
    OptimizerError.objects.create(
        run=run, epoch=0, variable="generator/state", operation="mutation", error="real"
    )
    # The attempt stopped mid-epoch 1 and was failed; resume it for a second epoch.
    run.config["epochs"] = 2
    run.save()
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, attempt=2)

    assert execution.execute(run.pk, 2) == Run.SUCCEEDED

    assert not Candidate.objects.filter(run=run, value=ghost).exists()
    assert not Candidate.objects.filter(run=run, candidate_id="c999").exists()
    assert kept <= set(Candidate.objects.filter(run=run).values_list("candidate_id", flat=True))
    assert list(OptimizerError.objects.filter(run=run).values_list("error", flat=True)) == ["real"]
    assert list(EpochLog.objects.filter(run=run).values_list("epoch", flat=True)) == [0, 1]


# -- C5: Channels send failures do not fail the run ------------------------------------------


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
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(epochs=1, evaluations_before=1, evaluations_after=1),
    )
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and run.error == ""
    assert EpochLog.objects.filter(run=run).count() == 1
    assert layer.calls > 3
    assert "Redis went away" in caplog.text


def test_web_side_broadcasts_survive_a_channel_layer_error(
    user, program, demo_dataset, monkeypatch
):
    monkeypatch.setattr(live, "get_channel_layer", lambda: _BrokenLayer())
    run = Run.objects.create(owner=user, program=program, dataset=demo_dataset, config=run_config())
    run = runs.request_cancel(run)
    assert run.status == Run.CANCELLED


def test_resumed_usage_adds_up_every_engine_counter_judge_failures_included():
    from training.services.usage import merged_usage

    first = {"calls": 3, "judge_failures": 1, "parse_failures": 2, "cost": 0.0}
    second = {"calls": 4, "judge_failures": 2, "parse_failures": 0, "cost": 0.0}
    merged = merged_usage(first, second)
    assert (merged["calls"], merged["judge_failures"], merged["parse_failures"]) == (7, 3, 2)
