"""Fixtures shared by the in-process web tests."""

import pytest


@pytest.fixture
def user_client(client, django_user_model):
    """Django's test client, logged in as a plain user."""
    user = django_user_model.objects.create_user("bob", password="a-long-password-2")
    client.force_login(user)
    return client
