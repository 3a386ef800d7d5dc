"""Fixtures for the datasets tests: a private MEDIA_ROOT, two users, logged-in clients."""

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="a-long-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="a-long-password-2")


@pytest.fixture
def alice_client(client, alice, media_root):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(django_user_model, bob, media_root):
    from django.test import Client

    other = Client()
    other.force_login(bob)
    return other


def stored_files(root) -> list[Path]:
    root = Path(root)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
