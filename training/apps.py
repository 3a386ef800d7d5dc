from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Connects the post_save handler that gives every new program its version 1.
        from training.services import program_versions  # noqa: F401
