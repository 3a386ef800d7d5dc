"""The Team page: an administrator adds members (not administrators) who get the demo at
once, resets a password (shown once), deactivates a member (their sessions end) and
reactivates them; members cannot see the page. An account made elsewhere gets the demo at
its first log-in."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from training.models import Program
from training.programs.demo import DEMO_NAME

pytestmark = pytest.mark.django_db

User = get_user_model()


@pytest.fixture
def admin_client(db):
    admin = User.objects.create_superuser("boss", password="boss-password-2026")
    client = Client()
    client.force_login(admin)
    return client


def add(admin_client, name="carol", password="a-long-first-password-1"):
    return admin_client.post(
        "/team/add/", {"username": name, "password1": password, "password2": password}
    )


def test_an_added_member_is_no_administrator_has_the_demo_and_can_log_in(admin_client):
    response = add(admin_client)
    assert response.status_code == 302
    carol = User.objects.get(username="carol")
    assert (carol.is_staff, carol.is_superuser, carol.is_active) == (False, False, True)
    assert Program.objects.filter(owner=carol, name=DEMO_NAME).count() == 1
    assert Client().login(username="carol", password="a-long-first-password-1")
    page = admin_client.get("/team/").content.decode()
    assert "carol can log in now" in page and 'data-member="carol"' in page


def test_an_account_made_outside_the_team_page_gets_the_demo_at_its_first_log_in(db):
    root = User.objects.create_superuser(
        "root", password="root-password-2026"
    )  # as createsuperuser
    assert not Program.objects.filter(owner=root).exists()
    browser = Client()
    login = {"username": "root", "password": "root-password-2026"}
    assert browser.post("/accounts/login/", login).status_code == 302
    assert Program.objects.filter(owner=root, name=DEMO_NAME).count() == 1
    home = browser.get("/").content.decode()
    assert 'id="first-run"' in home and DEMO_NAME in home
    assert Client().post("/accounts/login/", login).status_code == 302  # a second log-in
    assert Program.objects.filter(owner=root).count() == 1


def test_a_welcome_that_fails_is_logged_and_the_log_in_stands(db, monkeypatch, caplog):
    def broken(user):
        raise RuntimeError("the demo dataset is missing")

    monkeypatch.setattr("core.login_throttle.welcome", broken)
    User.objects.create_user("dora", password="dora-password-2026")
    browser = Client()
    login = {"username": "dora", "password": "dora-password-2026"}
    assert browser.post("/accounts/login/", login).status_code == 302
    assert browser.get("/").status_code == 200  # logged in
    assert "not welcomed at their first log-in" in caplog.text
    assert "the demo dataset is missing" in caplog.text


def test_a_weak_or_taken_name_is_refused_and_says_why(admin_client):
    add(admin_client)
    again = add(admin_client)
    assert again.status_code == 400
    assert "A user with that username already exists." in again.content.decode()
    weak = add(admin_client, name="dave", password="password")
    assert weak.status_code == 400
    assert "This password is too common." in weak.content.decode()
    assert not User.objects.filter(username="dave").exists()


def test_reset_password_shows_a_new_one_once(admin_client):
    add(admin_client)
    carol = User.objects.get(username="carol")
    response = admin_client.post(f"/team/{carol.pk}/password/", follow=True)
    shown = re.search(r"New password for carol: (\S+) \(shown once", response.content.decode())
    assert shown is not None
    assert Client().login(username="carol", password=shown.group(1))
    assert not Client().login(username="carol", password="a-long-first-password-1")
    assert shown.group(1) not in admin_client.get("/team/").content.decode()


def test_deactivating_ends_the_members_sessions_and_reactivating_restores_log_in(admin_client):
    add(admin_client)
    carol = User.objects.get(username="carol")
    session = Client()
    session.force_login(carol)
    assert session.get("/").status_code == 200
    admin_client.post(f"/team/{carol.pk}/active/", {"active": "0"})
    assert session.get("/").status_code == 302  # logged out: sent to the login page
    assert not Client().login(username="carol", password="a-long-first-password-1")
    admin_client.post(f"/team/{carol.pk}/active/", {"active": "1"})
    assert Client().login(username="carol", password="a-long-first-password-1")


def test_an_administrator_cannot_deactivate_themselves(admin_client):
    boss = User.objects.get(username="boss")
    response = admin_client.post(f"/team/{boss.pk}/active/", {"active": "0"}, follow=True)
    assert "You cannot deactivate yourself." in response.content.decode()
    boss.refresh_from_db()
    assert boss.is_active


def test_members_do_not_see_the_team_page(admin_client):
    add(admin_client)
    carol = User.objects.get(username="carol")
    member = Client()
    member.force_login(carol)
    assert member.get("/team/").status_code == 404
    assert member.post("/team/add/", {"username": "x"}).status_code == 404
    assert member.post(f"/team/{carol.pk}/password/").status_code == 404
    assert "/team/" not in member.get("/").content.decode()
    assert admin_client.post("/team/99999999999999999999999/active/").status_code == 404
