"""Saved endpoints' edges: the key unreadable after SECRET_KEY changed, "Test connection"
bounded in time against a real listener that never answers, the private-endpoints switch read
from the environment."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from training import conf
from training.programs import endpoint_keys, saved_endpoints

pytestmark = pytest.mark.django_db


def test_a_key_saved_under_another_secret_key_says_to_save_it_again(user, settings):
    endpoint = saved_endpoints.save(user, "lab", "http://127.0.0.1:9/v1", "sk-own")
    assert endpoint_keys.decrypt(endpoint.encrypted_key) == "sk-own"
    settings.SECRET_KEY = "another-secret-key-entirely"
    with pytest.raises(endpoint_keys.KeyUnreadable, match="save the endpoint's key again"):
        endpoint_keys.decrypt(endpoint.encrypted_key)
    result = saved_endpoints.test_connection(endpoint)
    assert not result.ok and "save the endpoint's key again" in result.error


@pytest.fixture
def silent_listener():
    """A TCP listener that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_test_connection_gives_up_within_its_bound(user, silent_listener):
    endpoint = saved_endpoints.save(user, "silent", silent_listener)
    started = time.monotonic()
    result = saved_endpoints.test_connection(endpoint)
    elapsed = time.monotonic() - started
    assert not result.ok and result.models == ()
    assert saved_endpoints.TEST_SECONDS - 0.5 <= elapsed <= saved_endpoints.TEST_SECONDS + 2


@pytest.mark.parametrize("raw, expected", [("0", False), ("off", False), ("1", True), ("", True)])
def test_the_private_endpoints_switch_is_read_from_the_environment(raw, expected, monkeypatch):
    monkeypatch.setenv("TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS", raw)
    assert conf.flag("TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS") is expected


def test_a_malformed_switch_names_the_variable(monkeypatch):
    monkeypatch.setenv("TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS", "maybe")
    with pytest.raises(ImproperlyConfigured, match="TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS"):
        conf.flag("TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS")
