"""The launch form explains itself: one help line per parameter (declared next to its bound),
basic vs advanced, presets that fill it (GET param), RandomFewShot's fixed few_shot_learning,
and the same limit in the browser's max and in the server's message."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from training.engine import bounds
from training.engine.optimizers import OMEGA, RandomFewShot
from training.execution.run_config import TRAINING, presets
from training.runs.forms import RunForm

pytestmark = pytest.mark.django_db


def test_every_launch_form_field_has_one_line_of_help():
    form = RunForm(user=None)
    for name, field in form.fields.items():
        assert field.help_text.strip(), name
        assert "\n" not in field.help_text, name


def test_optimizer_help_is_declared_next_to_each_bound():
    for cls in (RandomFewShot, OMEGA):
        offered = set(bounds.defaults(cls)) - {"seed", "name", "distance_function"}
        for key in offered:
            assert bounds.help_text(cls.PARAMETERS, key), (cls.__name__, key)
    form = RunForm(user=None)
    assert form.fields["omega_merging_rate"].help_text == OMEGA.PARAMETERS["merging_rate"].help
    # four temperatures share one bound, each with its own meaning
    helps = {
        OMEGA.PARAMETERS[f"{kind}_temperature"].help
        for kind in ("mutation", "crossover", "selection", "sampling")
    }
    assert len(helps) == 4
    assert OMEGA.PARAMETERS["mutation_temperature"] == OMEGA.PARAMETERS["sampling_temperature"]


def test_presets_stay_within_every_bound_and_say_what_they_launch():
    form = RunForm(user=None)
    for label_task in (True, False):
        for key, preset in presets(label_task).items():
            for name, value in preset["values"].items():
                field = form.fields[name]
                assert field.clean(value) == value, (key, name)
            values = preset["values"]
            assert (
                preset["label"]
                .split(": ")[1]
                .startswith(f"{values['optimizer']}, {values['epochs']} epoch")
            )
    assert presets(True)["quick"]["label"] == "Quick try: CalibratedLabels, 1 epoch"
    assert presets(False)["quick"]["values"]["optimizer"] == "RandomFewShot"


def test_random_few_shot_box_shows_what_the_optimizer_does(client_user, program):
    html = client_user.get(reverse("training:run-create") + f"?program={program.pk}").content
    box = re.search(rb'<input[^>]*id="id_rfs_few_shot_learning"[^>]*>', html).group(0)
    assert b"checked" in box and b"disabled" in box
    assert b"Always on" in html


def test_preset_get_param_fills_the_form(client_user, program):
    url = reverse("training:run-create") + f"?program={program.pk}&preset=thorough"
    html = client_user.get(url).content.decode()
    values = presets(False)["thorough"]["values"]
    assert re.search(
        rf'id="id_epochs"[^>]*value="{values["epochs"]}"|value="{values["epochs"]}"[^>]*id="id_epochs"',
        html,
    )
    assert 'id="advanced-settings"' in html and "<details" in html


def test_browser_max_and_server_message_name_the_same_limit(client_user, program, demo_dataset):
    page = client_user.get(reverse("training:run-create") + f"?program={program.pk}").content
    top = TRAINING["validation_split"].max
    field = re.search(rb'<input[^>]*id="id_validation_split"[^>]*>', page).group(0).decode()
    assert f'max="{top:g}"' in field
    response = client_user.post(
        reverse("training:run-create"),
        {
            "program": program.pk,
            "dataset": demo_dataset.pk,
            "optimizer": "RandomFewShot",
            "reward": "ExactMatch",
            "validation_split": str(top + 0.01),
        },
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["validation_split"]
    assert errors == [f"must be a number between 0 and {top:g}, got {top + 0.01:g}"]
    # and the advanced group stays folded for a basic field's error
    assert response.context["form"].advanced_has_errors() is False
