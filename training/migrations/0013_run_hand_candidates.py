"""Candidates by hand: Run.hand_candidates, the queue a worker adds to the live population."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0012_run_pause"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="hand_candidates",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
