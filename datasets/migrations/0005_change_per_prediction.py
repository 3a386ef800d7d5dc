"""A pending correction per row *and* prediction (``DatasetChange.mark_key``), so the
per-example table can mark the predictions before and after training of one row apart; the
marks already drafted get their key."""

from django.conf import settings
from django.db import migrations, models

from datasets.versions import mark_key


def key_existing_marks(apps, schema_editor):
    DatasetChange = apps.get_model("datasets", "DatasetChange")
    for change in DatasetChange.objects.exclude(kind="answer").only("id", "predicted"):
        DatasetChange.objects.filter(pk=change.pk).update(mark_key=mark_key(change.predicted))


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0004_dataset_versions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="datasetchange",
            name="datasetchange_one_pending_per_row",
        ),
        migrations.AddField(
            model_name="datasetchange",
            name="mark_key",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(key_existing_marks, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="datasetchange",
            constraint=models.UniqueConstraint(
                condition=models.Q(("version__isnull", True)),
                fields=("base", "author", "row_index", "mark_key"),
                name="datasetchange_one_pending_per_row_and_prediction",
            ),
        ),
    ]
