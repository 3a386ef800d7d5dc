"""A run's checkpoint and its queue of candidates by hand become tables of their own:
``RunCheckpoint`` (one row per run) and ``HandCandidate`` (one row per candidate queued).
Each run's ``checkpoint_json`` / ``checkpoint_epoch`` / ``checkpoint_position`` and its
``hand_candidates`` list are copied into them here; 0027 drops the old columns."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def to_tables(apps, schema_editor):
    """Copy each run's checkpoint columns and queue entries into the new tables."""
    Run = apps.get_model("training", "Run")
    RunCheckpoint = apps.get_model("training", "RunCheckpoint")
    HandCandidate = apps.get_model("training", "HandCandidate")
    now = django.utils.timezone.now()
    saved = Run.objects.filter(
        models.Q(checkpoint_json__isnull=False)
        | models.Q(checkpoint_epoch__isnull=False)
        | models.Q(checkpoint_position__isnull=False)
    ).values_list(
        "pk", "checkpoint_json", "checkpoint_epoch", "checkpoint_position", "heartbeat_at"
    )
    for pk, program, epoch, position, beat in saved.iterator():
        RunCheckpoint.objects.create(
            run_id=pk, program=program, epoch=epoch, position=position, saved_at=beat or now
        )
    queues = Run.objects.values_list("pk", "hand_queue_json")
    for pk, entries in queues.iterator():
        for position, entry in enumerate(entries if isinstance(entries, list) else [], 1):
            if not isinstance(entry, dict):
                continue
            HandCandidate.objects.create(
                run_id=pk,
                number=int(entry.get("n") or position),
                variable=str(entry.get("variable") or "")[:200],
                parent=str(entry.get("parent") or "")[:50],
                value=entry.get("value") or {},
                state=entry.get("state") or "queued",
                note=str(entry.get("note") or "")[:200],
            )


def to_columns(apps, schema_editor):
    """Back again: each table's rows into the run's columns."""
    Run = apps.get_model("training", "Run")
    RunCheckpoint = apps.get_model("training", "RunCheckpoint")
    HandCandidate = apps.get_model("training", "HandCandidate")
    for saved in RunCheckpoint.objects.iterator():
        Run.objects.filter(pk=saved.run_id).update(
            checkpoint_json=saved.program,
            checkpoint_epoch=saved.epoch,
            checkpoint_position=saved.position,
        )
    queues: dict[int, list] = {}
    for row in HandCandidate.objects.order_by("run_id", "number").iterator():
        queues.setdefault(row.run_id, []).append(
            {
                "n": row.number,
                "variable": row.variable,
                "parent": row.parent,
                "value": row.value,
                "state": row.state,
                "note": row.note,
            }
        )
    for pk, entries in queues.items():
        Run.objects.filter(pk=pk).update(hand_queue_json=entries)


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0025_from_code"),
    ]

    operations = [
        # The old list's name is wanted by the new table's reverse accessor.
        migrations.RenameField(
            model_name="run", old_name="hand_candidates", new_name="hand_queue_json"
        ),
        migrations.CreateModel(
            name="RunCheckpoint",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="checkpoint",
                        serialize=False,
                        to="training.run",
                    ),
                ),
                ("program", models.JSONField(blank=True, null=True)),
                ("epoch", models.IntegerField(blank=True, null=True)),
                ("position", models.JSONField(blank=True, null=True)),
                ("saved_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.CreateModel(
            name="HandCandidate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveIntegerField()),
                ("variable", models.CharField(max_length=200)),
                ("parent", models.CharField(max_length=50)),
                ("value", models.JSONField()),
                (
                    "state",
                    models.CharField(
                        choices=[("queued", "Queued"), ("added", "Added"), ("refused", "Refused")],
                        default="queued",
                        max_length=10,
                    ),
                ),
                ("note", models.CharField(blank=True, max_length=200)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="hand_candidates",
                        to="training.run",
                    ),
                ),
            ],
            options={
                "ordering": ["run", "number"],
                "constraints": [
                    models.UniqueConstraint(fields=("run", "number"), name="hand_candidate_number")
                ],
            },
        ),
        migrations.RunPython(to_tables, to_columns),
    ]
