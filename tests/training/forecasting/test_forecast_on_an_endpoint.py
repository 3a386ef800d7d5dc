"""A program on a saved endpoint is forecast from the runs made on that endpoint.

What runs observed belongs to a model where it is served: a program that calls a model on a
saved endpoint reads the observations kept under ``"<model> @ <URL>"``, while the same model
name elsewhere (the provider's own endpoint) keeps its own (none here: no time).
"""

from __future__ import annotations

import pytest

from tests.training.conftest import make_program, run_config
from tests.training.programs import test_server_keys
from tests.training.programs.test_server_keys import on_endpoint
from training.execution import forecast as forecast_services
from training.execution.pace import measured
from training.forecasting.measured import Observation
from training.models import ModelPace

# the fixture of that module, used here under the same name
listener = test_server_keys.listener

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_program_on_an_endpoint_reads_the_observations_made_there(user, demo_dataset, listener):
    program = on_endpoint(user, demo_dataset, listener)
    config = run_config(epochs=1, model=program.model)
    key = measured.pace_key(program, "openai/gpt-4o-mini")
    assert key == f"openai/gpt-4o-mini @ {listener.url}"
    seen = Observation(seconds={"prediction": 0.2}, tokens={"prediction": 300.0})
    ModelPace.objects.create(model=key, sizes={measured.OBSERVED_KEY: [seen.to_dict()]})

    there = forecast_services.forecast(program, demo_dataset, config)
    assert there["pace_key"] == key and there["measured"]["observed"] == {"prediction": 1}
    assert there["seconds"]["expected"] == pytest.approx(0.2 * there["calls"]["expected"])

    elsewhere = make_program(user, demo_dataset, model="openai/gpt-4o-mini")
    plain = forecast_services.forecast(elsewhere, demo_dataset, config)
    assert plain["pace_key"] == "openai/gpt-4o-mini" and plain["seconds"] is None
    assert listener.requests == []  # a forecast calls no model
