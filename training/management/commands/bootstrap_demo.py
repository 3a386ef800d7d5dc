"""``manage.py bootstrap_demo``: the demo dataset and a demo program for every user.

``manage.py prepare`` (core) calls it on every ``make run``; it is idempotent. A new user
then only has to open the demo program and press "Launch a run" to watch it learn
(``training.programs.demo``).
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from training.programs.demo import ensure_demo_program


class Command(BaseCommand):
    help = "Create the demo dataset and demo program for every user that lacks them."

    def handle(self, *args, **options):
        for user in get_user_model().objects.filter(is_active=True):
            ensure_demo_program(user)
