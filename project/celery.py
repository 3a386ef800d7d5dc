"""The Celery application: configured from Django settings (CELERY_* names).

Start workers with ``celery -A project worker``; any number, on any machine that can reach
the same DATABASE_URL and REDIS_URL.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
