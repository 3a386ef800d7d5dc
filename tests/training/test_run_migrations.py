"""The data migrations of runs: a row stored in an older shape reads in the current one
after ``migrate`` (each test migrates back to before its migration, stores the row as it
was then, and migrates forward again)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from training.models import HandCandidate, Run

from .conftest import run_config

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
    document = {"compile": {"optimizer": {"state": {"candidate_count": 3}}}}
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
