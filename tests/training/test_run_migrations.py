"""The data migrations of runs: a row stored in an older shape reads in the current one
after ``migrate`` (each test migrates back to before its migration, stores the row as it
was then, and migrates forward again)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from training.execution import attempt as execution
from training.execution import run_config as run_config_rules
from training.execution.run_config import fit_kwargs
from training.models import HandCandidate, ModelPace, OptimizerError, Run, run_json

from .conftest import make_run, run_config

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(target: str):
    """Migrate the training app to ``target`` (None: its latest); the apps as they were."""
    executor = MigrationExecutor(connection)
    if target is None:
        executor.loader.build_graph()
        nodes = [n for n in executor.loader.graph.leaf_nodes() if n[0] == "training"]
    else:
        nodes = [("training", target)]
    executor.migrate(nodes)
    return executor.loader.project_state(nodes).apps


def old_run(apps, user, program, dataset, **fields) -> int:
    """A run row stored by the historical model (its pk)."""
    OldRun = apps.get_model("training", "Run")
    row = OldRun.objects.create(
        owner_id=user.pk,
        program_id=program.pk,
        dataset_id=dataset.pk,
        config=fields.pop("config", run_config()),
        **fields,
    )
    return row.pk


def test_checkpoint_columns_and_the_queue_list_become_rows(user, program, demo_dataset):
    apps = migrate("0025_from_code")
    document = {"compile": {"optimizer": {"state": {"candidate_count": 3, "errors_reported": 0}}}}
    point = {"epoch": 1, "batch": 2}
    entries = [
        {"n": 1, "variable": "v", "parent": "c1", "value": {"instructions": "a"},
         "state": "added", "note": "c4"},
        {"n": 2, "variable": "v", "parent": "c2", "value": {"instructions": "b"},
         "state": "queued", "note": ""},
    ]  # fmt: skip
    paused = old_run(
        apps,
        user,
        program,
        demo_dataset,
        status="paused",
        checkpoint_json=document,
        checkpoint_epoch=0,
        checkpoint_position=point,
        hand_candidates=entries,
    )
    from_code = old_run(apps, user, program, demo_dataset, checkpoint_epoch=1)
    fresh = old_run(apps, user, program, demo_dataset)
    migrate(None)

    run = Run.objects.get(pk=paused)
    assert (run.checkpoint_json, run.checkpoint_epoch, run.checkpoint_position) == (
        document,
        0,
        point,
    )
    assert run.can_resume and run.paused_inside_epoch == {"epoch": 2, "batch": 2}
    rows = HandCandidate.objects.filter(run=run)
    assert [(r.number, r.parent, r.value, r.state, r.note) for r in rows] == [
        (1, "c1", {"instructions": "a"}, "added", "c4"),
        (2, "c2", {"instructions": "b"}, "queued", ""),
    ]
    code = Run.objects.get(pk=from_code)
    assert (code.checkpoint_json, code.checkpoint_epoch) == (None, 1)
    new = Run.objects.get(pk=fresh)
    assert (new.checkpoint_json, new.checkpoint_epoch, new.checkpoint_position) == (None,) * 3
    assert not new.hand_candidates.exists()


def test_a_config_without_a_selection_split_gets_none(user, program, demo_dataset):
    apps = migrate("0027_drop_run_checkpoint_and_queue_columns")
    config = run_config()
    del config["selection_split"]
    pk = old_run(apps, user, program, demo_dataset, config=config)
    migrate(None)

    run = Run.objects.get(pk=pk)
    assert run.json_version == run_json.VERSION == 3
    assert run.config["selection_split"] == 0.0
    assert fit_kwargs(run.config)["selection_split"] == 0.0


def test_a_config_without_a_training_order_says_file_order(user, program, demo_dataset):
    apps = migrate("0029_run_epoch_so_far")
    config = run_config()
    config.pop(run_config_rules.TRAINING_ORDER[0], None)
    pk = old_run(apps, user, program, demo_dataset, config=config, json_version=2)
    spread = dict(run_config(), training_order="spread_by_label")
    kept = old_run(apps, user, program, demo_dataset, config=spread, json_version=2)
    migrate(None)

    run = Run.objects.get(pk=pk)
    assert run.json_version == run_json.VERSION == 3
    assert run.config == {**config, "training_order": run_config_rules.FILE_ORDER}
    assert not run_config_rules.spreads_by_label(run.config)
    assert Run.objects.get(pk=kept).config == spread
    assert run_config_rules.spreads_by_label(Run.objects.get(pk=kept).config)


def test_a_checkpoint_saved_before_errors_were_counted_counts_those_the_run_keeps(
    user, program, demo_dataset
):
    """A run checkpointed before the optimizer counted its errors (no ``errors_reported``)
    gets the count of the errors a resume keeps (those up to its checkpoint's epoch), so it
    keeps its optimizer errors on resume, and a later resume does not take them for an
    abandoned attempt's."""
    run = make_run(user, program, demo_dataset, run_config(epochs=1))
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    apps = migrate("0027_drop_run_checkpoint_and_queue_columns")
    OldCheckpoint = apps.get_model("training", "RunCheckpoint")
    saved = OldCheckpoint.objects.get(run_id=run.pk)
    assert saved.epoch == 0
    del saved.program["compile"]["optimizer"]["state"]["errors_reported"]
    saved.save()
    for epoch, error in ((0, "earlier"), (1, "of an abandoned epoch")):
        OptimizerError.objects.create(
            run_id=run.pk, epoch=epoch, variable="generator/state", operation="mutation",
            error=error,
        )  # fmt: skip
    migrate(None)

    run = Run.objects.get(pk=run.pk)
    assert run.checkpoint_json["compile"]["optimizer"]["state"]["errors_reported"] == 1
    run.config["epochs"] = 2
    run.save()
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, attempt=2)
    assert execution.execute(run.pk, 2) == Run.SUCCEEDED
    run.refresh_from_db()
    assert list(OptimizerError.objects.filter(run=run).values_list("error", flat=True)) == [
        "earlier"
    ]
    assert run.checkpoint_json["compile"]["optimizer"]["state"]["errors_reported"] == 1


def test_a_models_measured_characters_per_token_outlive_its_dropped_pace(db):
    apps = migrate("0030_run_training_order_always_written")
    OldPace = apps.get_model("training", "ModelPace")
    OldPace.objects.create(model="local/smollm2", pace={"chars_per_token": 3.417}, sizes={})
    OldPace.objects.create(
        model="kept", pace={"chars_per_token": 3.0}, sizes={"chars_per_token": 2.5}
    )
    migrate(None)
    assert ModelPace.objects.get(model="local/smollm2").sizes == {"chars_per_token": 3.417}
    assert ModelPace.objects.get(model="kept").sizes == {"chars_per_token": 2.5}  # newer: kept
