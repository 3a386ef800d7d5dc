from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Shared plumbing: health, worker indicator, settings page, auth-required consumers."""

    name = "core"
    default_auto_field = "django.db.models.BigAutoField"
