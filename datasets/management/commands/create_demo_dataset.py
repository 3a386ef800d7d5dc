"""``manage.py create_demo_dataset [username]``: give a user the demo dataset.

Without a username it uses the first user (lowest id), as ``make run`` does for a new
install. Idempotent: a user who already has it keeps the one they have.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from datasets.services import create_demo_dataset


class Command(BaseCommand):
    help = "Import the built-in demo dataset for a user (default: the first user)."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?")

    def handle(self, *args, username=None, **options):
        users = get_user_model().objects.order_by("pk")
        user = users.filter(username=username).first() if username else users.first()
        if user is None:
            raise CommandError(f"No user {username!r}." if username else "There are no users.")
        dataset = create_demo_dataset(user)
        self.stdout.write(f"Demo dataset #{dataset.pk} ({dataset.row_count} rows) for {user}.")
