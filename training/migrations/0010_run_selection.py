from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0009_run_forecast_budget"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="selection",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
