"""``manage.py restore FILE.tar.gz``: a backup into a new, empty install (``core.backup``)."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core import backup


class Command(BaseCommand):
    help = "Restore a backup into a new, empty database, with its files and secret key."

    def add_arguments(self, parser):
        parser.add_argument("file", help="a file written by manage.py backup")

    def handle(self, *args, file, **options):
        try:
            manifest = backup.restore(Path(file))
        except (backup.BackupError, OSError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"restored {manifest['rows']} rows and {manifest['media_files']} files from a "
            f"{manifest['database_engine']} backup of {manifest['created']}"
        )
        if manifest["secret_key"] and os.environ.get("SECRET_KEY"):
            self.stdout.write(
                "SECRET_KEY is set in the environment: set it to the backed-up var/secret_key "
                "value, or saved endpoint keys cannot be read"
            )
        elif manifest["secret_key"]:
            self.stdout.write("secret key restored to var/secret_key: start Trainboard now")
