"""``manage.py backup FILE.tar.gz``: the database, uploaded files and secret key in one file
(``core.backup``)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core import backup


class Command(BaseCommand):
    help = "Write a backup (database, media, secret key) to one .tar.gz file."

    def add_arguments(self, parser):
        parser.add_argument("file", help="where to write it, e.g. backups/trainboard.tar.gz")

    def handle(self, *args, file, **options):
        try:
            manifest = backup.backup(Path(file))
        except (backup.BackupError, OSError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"backup written to {file}: {manifest['rows']} rows, {manifest['media_files']} "
            f"files, secret key {'included' if manifest['secret_key'] else 'NOT included (it comes from SECRET_KEY: keep that value yourself)'}"
        )
