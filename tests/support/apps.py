"""The ``test_support`` app: installed by the test settings only."""

from django.apps import AppConfig


class TestSupportConfig(AppConfig):
    """Registers the scripted ``fake/…`` models with the dashboard when Django starts.

    Every process of the test stack (pytest, daphne, the Celery worker, ``manage.py``) sets
    Django up with ``tests.support.settings``, so each one resolves ``fake/…`` model strings
    and loads programs saved with them; ``make run`` never does. Celery finds this app's
    ``tasks`` module the way it finds every installed app's.
    """

    name = "tests.support"
    label = "test_support"
    verbose_name = "Test support"

    def ready(self):
        from tests.support import fake_models

        fake_models.register()
