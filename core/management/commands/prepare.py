"""``manage.py prepare``: migrate, create the first user if none, run the demo hook.

One Python process instead of three keeps the warm ``make run`` start short. The demo
hook is the optional ``bootstrap_demo`` command that the datasets/runs apps may provide.
"""

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Apply migrations, create the first user if none exists, prepare the demo."

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.ensure_first_user()
        if "bootstrap_demo" in get_commands():
            call_command("bootstrap_demo")
        if "stop_runs" in get_commands():  # the runs the last stop paused go on
            call_command("stop_runs", "resume", stdout=self.stdout)

    def ensure_first_user(self):
        User = get_user_model()
        if User.objects.exists():
            return
        username = os.environ.get("TRAINBOARD_INITIAL_USERNAME") or "admin"
        password = os.environ.get("TRAINBOARD_INITIAL_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        # Printed once, stored nowhere but as a hash in the database.
        self.stdout.write(f"First user created -> username: {username}  password: {password}")
