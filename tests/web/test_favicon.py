"""The site has an icon: /favicon.ico is no 404, for anyone, and pages link it."""

from __future__ import annotations

import pytest
from django.templatetags.static import static


@pytest.mark.django_db
def test_favicon_ico_redirects_to_the_icon_without_a_login(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == static("core/favicon.svg")


@pytest.mark.django_db
def test_pages_link_the_icon(client):
    html = client.get("/accounts/login/").content.decode()
    assert f'<link rel="icon" href="{static("core/favicon.svg")}" type="image/svg+xml">' in html
