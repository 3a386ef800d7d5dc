"""Run JSON version 3 (``training.models.run_json``): every run's config says how its
training rows reached fit (``training_order``); a run stored before launch wrote it was fit on
its rows in file order."""

from django.db import migrations, models

from training.models import run_json


def to_version_3(apps, schema_editor):
    Run = apps.get_model("training", "Run")
    older = Run.objects.filter(json_version__lt=3)
    for pk, version, config in older.values_list("pk", "json_version", "config").iterator():
        Run.objects.filter(pk=pk).update(config=run_json.upgrade_config(version, config))
    older.update(json_version=3)


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0029_run_epoch_so_far"),
    ]

    operations = [
        migrations.RunPython(to_version_3, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="json_version",
            field=models.PositiveSmallIntegerField(default=3),
        ),
    ]
