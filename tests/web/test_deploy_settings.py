"""Production settings come from the environment: with the README's production block,
``manage.py check --deploy`` has nothing to say; every page carries a Content-Security-Policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent.parent

#: The README's "Production" block, as a deployment sets it.
PRODUCTION = {
    "TRAINBOARD_HTTPS": "1",
    "TRAINBOARD_HSTS_INCLUDE_SUBDOMAINS": "1",
    "TRAINBOARD_HSTS_PRELOAD": "1",
    "TRAINBOARD_PROXY_SSL_HEADER": "1",
    "ALLOWED_HOSTS": "trainboard.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://trainboard.example.org",
}


def check_deploy(tmp_path, extra: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DJANGO_SETTINGS_MODULE")}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", TRAINBOARD_VAR_DIR=str(tmp_path), **extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.smoke
def test_check_deploy_is_clean_with_the_production_settings(tmp_path):
    result = check_deploy(tmp_path, PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_them_check_deploy_names_what_is_missing(tmp_path):
    result = check_deploy(tmp_path, {})
    assert result.returncode == 1
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


def test_every_page_has_a_content_security_policy(client):
    response = client.get("/accounts/login/")
    policy = response.headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in directives["script-src"]
