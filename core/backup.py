"""Backup and restore of a Trainboard install: the database, the uploaded files, the secret key.

One ``.tar.gz`` holds everything a new machine needs:

- ``database.json``: every row, as Django's ``dumpdata`` writes it (natural keys; content
  types, permissions and sessions left out: ``migrate`` makes the first two, and sessions are
  not worth keeping). Portable: a backup of SQLite restores into PostgreSQL and back;
- ``media/``: ``MEDIA_ROOT`` (the uploaded datasets' files);
- ``secret_key``: ``var/secret_key`` when the key came from there. It encrypts the saved
  endpoints' keys (``training.programs.endpoint_keys``): without it they cannot be read;
- ``manifest.json``: when, from which database engine, how many rows.

A restore goes into an empty database (no user yet): it migrates, loads the rows (Django
resets the id sequences), puts the files back and the secret key in ``var/``. Archives are
opened with ``tarfile``'s ``data`` filter: no path outside the target, no links out, no
device files.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

#: Left out of ``database.json`` (made again by ``migrate``, or not worth keeping).
EXCLUDED = ["contenttypes", "auth.permission", "sessions"]
FORMAT = 1


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message says why and what to do."""


def secret_key_file() -> Path:
    return Path(settings.VAR_DIR) / "secret_key"


def backup(destination: Path) -> dict:
    """Write the archive to ``destination``; returns its manifest."""
    destination = Path(destination)
    with tempfile.TemporaryDirectory(prefix="trainboard-backup-") as work:
        rows = Path(work) / "database.json"
        call_command(
            "dumpdata",
            natural_foreign=True,
            natural_primary=False,
            exclude=EXCLUDED,
            output=str(rows),
            verbosity=0,
        )
        count = len(json.loads(rows.read_text(encoding="utf-8")))
        media = Path(settings.MEDIA_ROOT)
        has_key = secret_key_file().is_file()
        manifest = {
            "format": FORMAT,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "database_engine": connection.vendor,
            "rows": count,
            "media_files": sum(1 for p in media.rglob("*") if p.is_file()) if media.is_dir() else 0,
            "secret_key": has_key,
        }
        destination.parent.mkdir(parents=True, exist_ok=True)
        partial = destination.with_name(destination.name + ".partial")
        with tarfile.open(partial, "w:gz") as archive:
            _add_bytes(archive, "manifest.json", json.dumps(manifest, indent=2).encode())
            archive.add(rows, arcname="database.json")
            if media.is_dir():
                archive.add(media, arcname="media")
            if has_key:
                archive.add(secret_key_file(), arcname="secret_key")
        partial.chmod(0o600)  # it holds password hashes and the secret key
        partial.replace(destination)
    return manifest


def restore(source: Path) -> dict:
    """Restore the archive at ``source`` into this (empty) install; returns its manifest."""
    source = Path(source)
    if not source.is_file():
        raise BackupError(f"{source}: no such file")
    with tempfile.TemporaryDirectory(prefix="trainboard-restore-") as work:
        try:
            with tarfile.open(source, "r:gz") as archive:
                archive.extractall(work, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BackupError(f"{source}: not a Trainboard backup ({exc})") from None
        root = Path(work)
        try:
            manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise BackupError(f"{source}: no manifest.json: not a Trainboard backup") from None
        if manifest.get("format") != FORMAT:
            raise BackupError(f"{source}: backup format {manifest.get('format')!r} is unknown")
        call_command("migrate", interactive=False, verbosity=0)
        if get_user_model().objects.exists():
            raise BackupError(
                "this install already has users: restore into a new, empty database "
                "(a fresh DATABASE_URL, or an empty var/ before the first make run)"
            )
        call_command("loaddata", str(root / "database.json"), verbosity=0)
        if (root / "media").is_dir():
            shutil.copytree(root / "media", settings.MEDIA_ROOT, dirs_exist_ok=True)
        if (root / "secret_key").is_file():
            secret_key_file().write_bytes((root / "secret_key").read_bytes())
            secret_key_file().chmod(0o600)
    return manifest


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    archive.addfile(info, io.BytesIO(data))
