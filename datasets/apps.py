from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"
    default_auto_field = "django.db.models.BigAutoField"
