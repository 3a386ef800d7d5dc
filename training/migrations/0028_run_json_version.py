"""Runs say the shape of their JSON (``Run.json_version``, ``training.models.run_json``);
the runs stored before are version 1 and are upgraded here to version 2: a configuration
without ``selection_split`` gets 0.0, a checkpoint's optimizer state without
``errors_reported`` gets the count of the optimizer errors the run keeps when it resumes
from it (those of the epochs up to the checkpoint, as a resume kept them)."""

from django.db import migrations, models

from training.models import run_json


def errors_kept(OptimizerError, run_id, epoch, position):
    """The run's optimizer errors a resume from this checkpoint keeps: a pause's keep its
    epoch's and the earlier ones; an epoch's end keeps those up to that epoch."""
    errors = OptimizerError.objects.filter(run_id=run_id)
    if isinstance(position, dict) and isinstance(position.get("epoch"), int):
        errors = errors.filter(epoch__lte=position["epoch"])
    elif epoch is not None:
        errors = errors.filter(epoch__lte=epoch)
    return errors.count()


def to_version_2(apps, schema_editor):
    Run = apps.get_model("training", "Run")
    RunCheckpoint = apps.get_model("training", "RunCheckpoint")
    OptimizerError = apps.get_model("training", "OptimizerError")
    for pk, config in Run.objects.filter(json_version=1).values_list("pk", "config").iterator():
        Run.objects.filter(pk=pk).update(config=run_json.upgrade_config(1, config))
    old = RunCheckpoint.objects.filter(run__json_version=1, program__isnull=False)
    for saved in old.iterator():
        kept = errors_kept(OptimizerError, saved.run_id, saved.epoch, saved.position)
        program = run_json.upgrade_checkpoint(1, saved.program, kept)
        RunCheckpoint.objects.filter(pk=saved.pk).update(program=program)
    Run.objects.filter(json_version=1).update(json_version=2)


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0027_drop_run_checkpoint_and_queue_columns"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="json_version",
            field=models.PositiveSmallIntegerField(default=1),
        ),
        migrations.RunPython(to_version_2, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="json_version",
            field=models.PositiveSmallIntegerField(default=2),
        ),
    ]
