"""The run's checkpoint and queue columns go: 0026 copied them into their tables."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0026_run_checkpoints_and_hand_candidates"),
    ]

    operations = [
        migrations.RemoveField(model_name="run", name="checkpoint_epoch"),
        migrations.RemoveField(model_name="run", name="checkpoint_json"),
        migrations.RemoveField(model_name="run", name="checkpoint_position"),
        migrations.RemoveField(model_name="run", name="hand_queue_json"),
    ]
