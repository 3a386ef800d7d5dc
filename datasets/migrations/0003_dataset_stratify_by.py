from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("datasets", "0002_dataset_importing")]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="stratify_by",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
    ]
