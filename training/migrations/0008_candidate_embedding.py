from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("training", "0007_run_branches"),
    ]

    operations = [
        migrations.AddField(
            model_name="candidate",
            name="embedding",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="candidate",
            name="status_epoch",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
