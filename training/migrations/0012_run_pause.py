"""Pause and resume a running run: the "paused" status and Run.pause_requested."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0011_run_refusals"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="pause_requested",
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("stopped", "Stopped"),
                    ("paused", "Paused"),
                ],
                db_index=True,
                default="queued",
                max_length=10,
            ),
        ),
    ]
