"""Test-only code the live processes of the test stack load: the ``test_support`` Django app.

The test settings (``tests.support.settings``: Trainboard's settings plus this app and a fast
password hasher) are what pytest and the test stack's daphne, Celery worker and ``manage.py``
run with. Production settings never list this app, so nothing here is reachable from ``make
run``.
"""
