from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0010_run_selection"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="refusals",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
