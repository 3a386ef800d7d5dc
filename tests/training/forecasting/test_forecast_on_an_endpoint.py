"""A program on a saved endpoint is timed by a calibration made on that endpoint.

The forecast's pace belongs to a model where it is served: the worker's calibration calls
the endpoint's URL with the endpoint's own key (a real HTTP listener records what arrived),
stores the pace under ``"<model> @ <URL>"``, and the form's forecast of that program is then
timed, while the same model name elsewhere (the provider's own endpoint) stays unmeasured.
"""

from __future__ import annotations

import json

import pytest

from tests.support.waiting import until
from tests.training.conftest import run_config
from tests.training.programs import test_server_keys
from tests.training.programs.test_server_keys import SERVER_KEY, on_endpoint
from training.execution import forecast as forecast_services
from training.execution.pace import calibration
from training.models import ModelPace

from . import test_forecast

# the fixtures of those modules, used here under the same names
listener = test_server_keys.listener
no_broker = test_forecast.no_broker

pytestmark = pytest.mark.django_db(transaction=True)

ENDPOINT_KEY = "calibration-endpoint-key-51"


@pytest.fixture(autouse=True)
def _no_requests_remembered():
    calibration._requested.clear()
    yield
    calibration._requested.clear()


def test_a_program_on_an_endpoint_is_calibrated_there_with_its_own_key(
    user, demo_dataset, listener, no_broker
):
    program = on_endpoint(user, demo_dataset, listener, key=ENDPOINT_KEY)
    config = run_config(epochs=1, model=program.model)

    first = forecast_services.forecast(program, demo_dataset, config)

    assert first["state"] == "measuring" and "seconds" not in first
    assert first["pace_key"] == f"openai/gpt-4o-mini @ {listener.url}"
    until(
        lambda: len(no_broker) == 1,
        5,
        "the forecast asked a worker to measure the endpoint's model",
    )
    model, key, owner_id, endpoint = no_broker[0]
    assert (model, key, owner_id, endpoint) == (
        "openai/gpt-4o-mini",
        first["pace_key"],
        user.pk,
        "lab",
    )
    assert ENDPOINT_KEY not in json.dumps(no_broker)  # the key never goes through the broker

    calibration.calibrate_model(*no_broker[0])  # what the worker does

    posts = [r for r in listener.requests if r["body"]]
    assert len(posts) >= 5  # the calibration's calls reached the endpoint
    for request in posts:
        headers = {name.lower(): value for name, value in request["headers"].items()}
        assert headers.get("authorization") == f"Bearer {ENDPOINT_KEY}"
        assert SERVER_KEY not in json.dumps(request)
    assert list(ModelPace.objects.values_list("model", flat=True)) == [first["pace_key"]]
    ready = forecast_services.forecast(program, demo_dataset, config)
    assert ready["state"] == "ready" and ready["seconds"]["expected"] > 0


def test_a_removed_endpoint_fails_the_calibration_in_words(user, demo_dataset, listener):
    program = on_endpoint(user, demo_dataset, listener)
    key, endpoint = calibration.pace_key(program, "openai/gpt-4o-mini")
    user.endpoints.all().delete()

    calibration.calibrate_model("openai/gpt-4o-mini", key, user.pk, endpoint)

    _, sizes = calibration.current(key)
    assert calibration.failure(sizes) == (
        "the model refused the calibration: the endpoint 'lab' is not saved (any more)"
    )
    assert listener.requests == []
