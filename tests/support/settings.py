"""Trainboard's settings plus the ``test_support`` app (scripted fake models, the echo
consumer and the plumbing tasks). pytest.ini and the test stack (tests/conftest.py) use it."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.apps.TestSupportConfig"]  # noqa: F405
