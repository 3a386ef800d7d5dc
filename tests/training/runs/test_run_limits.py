"""The launch form's limits are the engine's: the same bound gives the browser's HTML
min/max, the server's field message and the engine constructor's refusal; the optimizers'
initial values are their signature defaults, training's the dashboard's one set of suggestions."""

from __future__ import annotations

import inspect
import re

import pytest
from django.urls import reverse

from tests.training.conftest import run_config
from tests.training.test_views import launch_data
from training import optimizer_registry
from training.engine import bounds
from training.engine.optimizers import dns
from training.execution.run_config import (
    TRAINING,
    TRAINING_DEFAULTS,
    RunConfigError,
    optimizer_parameters,
)
from training.models import Run
from training.runs.forms import RunForm

pytestmark = pytest.mark.django_db


def _bounded_fields():
    """(form field name, engine bound) of every number on the launch form."""
    pairs = [(key, bound) for key, bound in TRAINING.items()]
    for name in optimizer_registry.names():
        for key, (_default, bound) in optimizer_parameters(name).items():
            if isinstance(bound, bounds.IntRange | bounds.FloatRange):
                pairs.append((optimizer_registry.field_name(name, key), bound))
    return pairs


def _attribute(html: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', html)
    return found.group(1) if found else None


def test_every_engine_parameter_bound_is_on_the_form():
    names = {field for field, _ in _bounded_fields()}
    assert {
        "rfs_nb_min_examples",
        "rfs_nb_max_examples",
        "rfs_nb_candidates",
        "omega_k_nearest_fitter",
        "omega_mutation_temperature",
        "omega_crossover_temperature",
        "omega_selection_temperature",
        "omega_sampling_temperature",
        "omega_nb_min_examples",
        "omega_nb_max_examples",
        "omega_merging_rate",
        "omega_population_size",
        "nfs_k",
        "nfs_pool_size",
        "cal_pool_size",
        "epochs",
        "batch_size",
        "validation_split",
        "selection_split",
        "seed",
        "evaluations_before",
        "evaluations_after",
    } == names
    assert TRAINING["validation_split"] is bounds.VALIDATION_SPLIT
    assert optimizer_registry.get("OMEGA").PARAMETERS["population_size"] is dns.POPULATION_SIZE


@pytest.mark.parametrize(("field", "bound"), _bounded_fields())
def test_html_bounds_the_browser_enforces_are_the_engines(field, bound):
    html = str(RunForm()[field])
    assert _attribute(html, "type") == "number"
    assert float(_attribute(html, "min")) == bound.min
    if bound.max is None:
        assert _attribute(html, "max") is None
    else:
        assert float(_attribute(html, "max")) == bound.max
    # Floats are not rounded by the server, so the browser must not impose a step either.
    expected_step = "any" if isinstance(bound, bounds.FloatRange) else None
    assert _attribute(html, "step") == expected_step


def test_initial_values_are_the_dashboard_training_defaults_and_the_optimizer_signatures():
    form = RunForm()
    for key in ("epochs", "batch_size", "validation_split", "shuffle"):
        assert form.fields[key].initial == TRAINING_DEFAULTS[key]
    # The dashboard's suggestions are within the engine's bounds for fit.
    assert bounds.EPOCHS.min <= TRAINING_DEFAULTS["epochs"]
    assert bounds.BATCH_SIZE.min <= TRAINING_DEFAULTS["batch_size"]
    assert (
        bounds.VALIDATION_SPLIT.min
        <= TRAINING_DEFAULTS["validation_split"]
        <= bounds.VALIDATION_SPLIT.max
    )
    for name, cls in optimizer_registry.classes().items():
        signature = inspect.signature(cls).parameters
        for key in optimizer_parameters(name):
            if key in ("language_model", "embedding_model", "instructions"):
                continue  # blank on the form: "the program's model" / the settings' default
            default = cls.CARD.defaults.get(key, signature[key].default)
            # a parameter that cannot change what the optimizer does is shown as it acts
            default = getattr(cls, "FIXED", {}).get(key, default)
            assert form.fields[optimizer_registry.field_name(name, key)].initial == default, key


def test_dashboard_omega_defaults_carry_few_shot_examples_from_one_place():
    """The guide's OMEGA default is few_shot_learning=False; the dashboard's is True (label
    tasks, see its card): the form's initial value, a configuration without the field and
    the optimizer a run builds all agree."""
    assert optimizer_registry.card("OMEGA").defaults == {"few_shot_learning": True}
    assert (
        inspect.signature(optimizer_registry.get("OMEGA")).parameters["few_shot_learning"].default
        is False
    )
    assert RunForm().fields["omega_few_shot_learning"].initial is True
    assert optimizer_parameters("OMEGA")["few_shot_learning"] == (True, None)
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_embedding_model="")
    assert config["optimizer"]["params"]["few_shot_learning"] is True
    # an unticked box is an explicit False, not "the default"
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_few_shot_learning=False)
    assert config["optimizer"]["params"]["few_shot_learning"] is False
    # RandomFewShot always samples examples: its box is shown as it acts (FIXED), not the
    # signature's False
    assert RunForm().fields["rfs_few_shot_learning"].initial is True


@pytest.mark.parametrize(("field", "bound"), _bounded_fields())
def test_a_value_below_the_bound_is_reported_on_its_field(
    client_user, program, demo_dataset, field, bound
):
    below = bound.min - (1 if isinstance(bound, bounds.IntRange) else 0.005)
    overrides = {field: str(below)}
    if field.startswith("omega_"):
        overrides["optimizer"] = "OMEGA"
    response = client_user.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, **overrides)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field], errors
    assert errors[field] == [f"must be {bound.describe()}, got {below}"]
    assert not Run.objects.exists()


def test_validation_split_bound_is_one_rule_for_browser_server_and_fit():
    top = bounds.VALIDATION_SPLIT.max
    assert run_config(validation_split=top)["validation_split"] == top
    with pytest.raises(RunConfigError) as raised:
        run_config(validation_split=top + 0.01)
    assert raised.value.errors == {
        "validation_split": f"must be {bounds.VALIDATION_SPLIT.describe()}, got {top + 0.01}"
    }
    form_field = RunForm().fields["validation_split"]
    assert (form_field.min_value, form_field.max_value) == (0.0, top)


def test_engine_refusal_lands_on_the_parameters_field():
    """A rule only the constructor knows (nb_min <= nb_max) still lands on its field."""
    with pytest.raises(RunConfigError) as raised:
        run_config(optimizer="OMEGA", omega_nb_min_examples=5, omega_nb_max_examples=2)
    assert raised.value.errors == {
        "omega_nb_max_examples": "must be at least nb_min_examples (5), got 2"
    }


def test_code_callers_get_every_bad_parameter_at_once():
    bad = dict(omega_population_size=1, omega_merging_rate=1.5, omega_selection="tournament")
    with pytest.raises(RunConfigError) as raised:
        run_config(optimizer="OMEGA", epochs=0, **bad)
    assert set(raised.value.errors) == {"epochs", *bad}
    assert "got 1" in raised.value.errors["omega_population_size"]
    assert "'tournament'" in raised.value.errors["omega_selection"]


def test_stored_json_keeps_its_shape():
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_embedding_model="")
    assert list(config["optimizer"]["params"]) == [
        "language_model",
        "embedding_model",
        "k_nearest_fitter",
        "mutation_temperature",
        "crossover_temperature",
        "selection_temperature",
        "sampling_temperature",
        "few_shot_learning",
        "nb_min_examples",
        "nb_max_examples",
        "merging_rate",
        "population_size",
        "algorithm",
        "selection",
        "instructions",
    ]
    params = config["optimizer"]["params"]
    assert (params["language_model"], params["embedding_model"], params["instructions"]) == (
        "",
        "",
        "",
    )
    assert isinstance(params["merging_rate"], float) and params["population_size"] == 10
    assert list(run_config()["optimizer"]["params"]) == [
        "few_shot_learning",
        "nb_min_examples",
        "nb_max_examples",
        "nb_candidates",
    ]
