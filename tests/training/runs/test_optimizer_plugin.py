"""An optimizer is a plug-in: its own module plus one line in ``TRAINBOARD_OPTIMIZERS``.

The toy ``Shuffler`` (tests/support/toy_optimizer.py) is added to the setting here and
nowhere else; the launch form offers it with its parameter, a launch with it stores its
parameters, the forecast counts its calls, a run with it executes to the end on a fake LM,
and the run page names it.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.support.toy_optimizer import Shuffler
from tests.training.test_views import launch_data
from training.engine.saving import deserialize, serialize
from training.execution import attempt as execution
from training.models import Run
from training.runs.forms import RunForm

pytestmark = pytest.mark.django_db(transaction=True)

TOY = "tests.support.toy_optimizer.Shuffler"


@pytest.fixture(autouse=True)
def _toy_offered(settings):
    settings.TRAINBOARD_OPTIMIZERS = [*settings.TRAINBOARD_OPTIMIZERS, TOY]


def toy_data(program, dataset, **overrides):
    return launch_data(
        program, dataset, **{"optimizer": "Shuffler", "shuf_nb_examples": "3", **overrides}
    )


def test_the_toy_saves_and_loads_as_the_engines_own_do():
    data = serialize(Shuffler(nb_examples=3, seed=5))
    assert data["class_name"] == "trainboard>Shuffler"
    loaded = deserialize(data)
    assert type(loaded) is Shuffler and (loaded.nb_examples, loaded.seed) == (3, 5)


def test_the_launch_form_offers_the_toy_with_its_parameter(client_user, program):
    form = RunForm(user=None)
    assert ("Shuffler", "Shuffler") in form.fields["optimizer"].choices
    assert "Shuffler proposes the latest training examples" in form.fields["optimizer"].help_text
    field = form.fields["shuf_nb_examples"]
    assert field.label == "nb_examples"
    assert field.help_text == Shuffler.PARAMETERS["nb_examples"].help
    assert (field.min_value, field.max_value, field.initial) == (1, 8, 2)

    html = client_user.get(f"{reverse('training:run-create')}?program={program.pk}").content
    html = html.decode()
    assert '<option value="Shuffler">Shuffler</option>' in html
    assert 'data-optimizer="Shuffler"' in html  # its own box, shown when it is chosen
    box = re.search(r'data-optimizer="Shuffler" hidden>(.*?)</div>', html, re.S).group(1)
    assert 'name="shuf_nb_examples"' in box  # its primary parameter, with the basics
    assert Shuffler.PARAMETERS["nb_examples"].help in html

    # an address pre-fills it as any other optimizer's (training.runs.prefill)
    query = f"?program={program.pk}&optimizer=Shuffler&shuf_nb_examples=4"
    html = client_user.get(reverse("training:run-create") + query).content.decode()
    assert '<option value="Shuffler" selected>Shuffler</option>' in html
    assert re.search(r'<input[^>]*name="shuf_nb_examples"[^>]*value="4"', html)


def test_a_launch_with_the_toy_stores_its_parameters_and_its_bound_is_kept(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    refused = client_user.post(
        reverse("training:run-create"), toy_data(program, demo_dataset, shuf_nb_examples="9")
    )
    assert refused.status_code == 200 and not Run.objects.exists()
    assert "must be a whole number between 1 and 8, got 9" in refused.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        response = client_user.post(reverse("training:run-create"), toy_data(program, demo_dataset))
    run = Run.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.config["optimizer"] == {"name": "Shuffler", "params": {"nb_examples": 3}}
    assert no_broker == [[run.pk, 1]]


def forecast_calls(client, program, dataset, **overrides) -> int:
    """The LM calls the launch form's forecast counts for the toy with ``overrides``."""
    response = client.get(reverse("training:run-forecast"), toy_data(program, dataset, **overrides))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-state="problem"' not in html  # the form is valid: counted, not refused
    return int(re.search(r'data-calls="(\d+)"', html).group(1))


def test_the_forecast_counts_the_toys_calls(client_user, program, demo_dataset):
    one = forecast_calls(client_user, program, demo_dataset, epochs="1")
    three = forecast_calls(client_user, program, demo_dataset, epochs="3")
    assert 0 < one < three


def test_a_run_with_the_toy_executes_to_the_end_and_its_page_names_it(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(
            reverse("training:run-create"),
            toy_data(program, demo_dataset, epochs="2", evaluations_after="1"),
        )
    run = Run.objects.get(owner=user)

    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    proposed = list(run.candidates.filter(operation="few_shot"))
    assert len(proposed) == 2  # one set an epoch, of the 3 latest pooled examples
    assert all(len(candidate.value["examples"]) == 3 for candidate in proposed)

    response = client_user.get(run.get_absolute_url())
    assert response.status_code == 200
    assert f"<code>{run.model_name}</code> · Shuffler · 2 epochs" in response.content.decode()
