from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0019_ablation"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="checkpoint_position",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
