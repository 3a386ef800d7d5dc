"""Versions of one dataset share its name (the version number says which one): the
versions published before were named "<name> vN"; they lose that suffix."""

from django.db import migrations


def drop_version_suffix(apps, schema_editor):
    Dataset = apps.get_model("datasets", "Dataset")
    for dataset in Dataset.objects.filter(version__gt=1).only("id", "name", "version"):
        suffix = f" v{dataset.version}"
        if dataset.name.endswith(suffix):
            Dataset.objects.filter(pk=dataset.pk).update(name=dataset.name[: -len(suffix)])


class Migration(migrations.Migration):
    dependencies = [("datasets", "0005_change_per_prediction")]

    operations = [migrations.RunPython(drop_version_suffix, migrations.RunPython.noop)]
