"""``manage.py backup`` then ``manage.py restore`` on a new install: the people, their data,
their uploaded files and their saved endpoint keys come back (the secret key with them), ids
go on after the restored ones, and a restore never lands on an install that has users. Each
step is its own process with Trainboard's production settings, as an operator runs them;
SQLite to SQLite and SQLite to PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import psycopg
import pytest

BASE_DIR = Path(__file__).resolve().parent.parent.parent

SEED = """
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from training.models import Endpoint, Program
from training.programs import endpoint_keys
from training.programs.demo import ensure_demo_program
ann = get_user_model().objects.create_user("ann", password="ann-password-2026")
ensure_demo_program(ann)
Endpoint.objects.create(owner=ann, name="box", url="http://127.0.0.1:8766/v1",
                        encrypted_key=endpoint_keys.encrypt("sk-ann-server"))
default_storage.save("uploads/ann/notes.csv", ContentFile(b"text,label\\nhi,greeting\\n"))
print(Program.objects.count())
"""

CHECK = """
from django.contrib.auth import authenticate, get_user_model
from django.core.files.storage import default_storage
from training.models import Endpoint, Program
from training.programs import endpoint_keys
ann = authenticate(username="ann", password="ann-password-2026")
key = endpoint_keys.decrypt(Endpoint.objects.get(owner=ann, name="box").encrypted_key)
before = Program.objects.count()
old = Program.objects.get(owner=ann)
old.pk = None
old.name = "after the restore"
old.save()  # a new row: ids go on after the restored ones
print(ann.username, key, before, default_storage.open("uploads/ann/notes.csv").read().decode().splitlines()[1])
"""


def manage(var: Path, *args: str, database_url: str | None = None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DEBUG", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "SECRET_KEY")
    }
    env.update(DJANGO_SETTINGS_MODULE="project.settings", TRAINBOARD_VAR_DIR=str(var))
    if database_url:
        env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture(scope="module")
def backed_up(tmp_path_factory) -> Path:
    """One install's backup for the module's restores (each restores it into a new one)."""
    tmp_path = tmp_path_factory.mktemp("backup")
    source = tmp_path / "old"
    assert manage(source, "migrate", "--verbosity", "0").returncode == 0
    seeded = manage(source, "shell", "-c", SEED)
    assert seeded.returncode == 0, seeded.stderr
    archive = tmp_path / "backups" / "trainboard.tar.gz"
    made = manage(source, "backup", str(archive))
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"backup written to {archive}: ")
    assert "secret key included" in made.stdout
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    with tarfile.open(archive) as opened:
        names = set(opened.getnames())
    assert {"manifest.json", "database.json", "secret_key", "media/uploads/ann/notes.csv"} <= names
    return archive


def test_a_restore_on_a_new_sqlite_install_brings_everything_back(tmp_path, backed_up):
    target = tmp_path / "new"
    restored = manage(target, "restore", str(backed_up))
    assert restored.returncode == 0, restored.stderr
    assert "secret key restored to var/secret_key" in restored.stdout
    checked = manage(target, "shell", "-c", CHECK)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1].split() == ["ann", "sk-ann-server", "1", "hi,greeting"]
    again = manage(target, "restore", str(backed_up))
    assert again.returncode == 1
    assert "this install already has users: restore into a new, empty database" in again.stderr


def test_a_sqlite_backup_restores_into_postgresql(tmp_path, backed_up):
    name = f"tb_restore_{os.getpid()}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    try:
        restored = manage(tmp_path / "pg", "restore", str(backed_up), database_url=url)
        assert restored.returncode == 0, restored.stderr
        checked = manage(tmp_path / "pg", "shell", "-c", CHECK, database_url=url)
        assert checked.returncode == 0, checked.stderr
        assert checked.stdout.splitlines()[-1].split() == [
            "ann",
            "sk-ann-server",
            "1",
            "hi,greeting",
        ]
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_file_that_is_no_backup_is_refused_with_a_reason(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar file")
    refused = manage(tmp_path / "new", "restore", str(junk))
    assert refused.returncode == 1
    assert f"{junk}: not a Trainboard backup" in refused.stderr
    assert "Traceback" not in refused.stderr
