"""Trainboard's settings plus the ``test_support`` app (scripted fake models, the echo
consumer and the plumbing tasks). pytest.ini and the test stack (tests/conftest.py) use it."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.apps.TestSupportConfig"]  # noqa: F405

# Speed only: PBKDF2's 1,000,000 rounds cost ~0.3 s of a core per hash, and the suite hashes
# a password for each user its fixtures create (~300 tests) and each login of the live stack
# (every browser test): minutes of CI. Login, sessions and permissions work the same with any
# hasher; production keeps Django's default (project/settings.py).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
