"""What a new user ran into while walking through the dashboard, pinned as behaviour.

* a model string with an unknown provider (``nosuch/model``) was accepted by the program
  form and by OMEGA's ``language_model``, so a run "succeeded" with every mutation failed;
* an unknown local model (``local/nosuch``) on the program form was a 500 page;
* the history CSV counted epochs from 0 while the run page and the plot count from 1;
* the metrics checkboxes were nested inside one ``<label>`` with the field's name.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from training.models import Program, Run
from training.services.lm import ModelStringError, make_embedding_model, make_language_model
from training.services.programs import ProgramError, build_engine_program

from .test_views import launch_data


def _program_post(dataset, model):
    return {
        "name": "typo",
        "dataset": dataset.pk,
        "module": "ChainOfThought",
        "model": model,
        "temperature": "0",
    }


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("nosuch/model", "unknown provider &#x27;nosuch&#x27;"),
        ("local/nosuch", "local/smollm2"),  # the engine's list of offline models
    ],
)
def test_program_form_reports_an_unusable_model_on_the_model_field(
    client_user, demo_dataset, model, text
):
    response = client_user.post(
        reverse("training:program-create"), _program_post(demo_dataset, model)
    )
    assert response.status_code == 200  # the form again, not a server error
    assert response.context["form"].errors["model"]
    assert text in response.content.decode()
    assert not Program.objects.filter(name="typo").exists()


def test_known_providers_still_build_without_a_network():
    for model in ("openai/gpt-4o-mini", "ollama/llama3", "hosted_vllm/my-model"):
        assert make_language_model(model).model == model
    with pytest.raises(ModelStringError, match="unknown provider 'nosuch'"):
        make_embedding_model("nosuch/embedder")
    with pytest.raises(ProgramError, match="local/smollm2"):
        build_engine_program(
            name="p",
            input_fields=[{"name": "q", "type": "str", "description": ""}],
            target_fields=[{"name": "a", "type": "str", "description": ""}],
            module="Generator",
            instructions="",
            model="local/nosuch",
        )


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"optimizer": "OMEGA", "omega_language_model": "nosuch/model"}, "omega_language_model"),
        ({"optimizer": "OMEGA", "omega_embedding_model": "minilm"}, "omega_embedding_model"),
        ({"reward": "LMAsJudge", "reward_language_model": "nosuch/judge"}, "reward_language_model"),
    ],
)
def test_launch_form_reports_a_mistyped_model_on_its_field_even_with_other_errors(
    client_user, program, demo_dataset, overrides, field
):
    # An other bad field at the same time: the typo must not wait for the next submit.
    data = launch_data(program, demo_dataset, epochs="0", **overrides)
    response = client_user.post(reverse("training:run-create"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "epochs" in errors and field in errors, errors
    assert "provider" in " ".join(errors[field])
    assert not Run.objects.exists()


def test_history_csv_counts_epochs_like_the_run_page(client_user, user, program, demo_dataset):
    from .test_views import make_finished_run

    run = make_finished_run(user, program, demo_dataset, rewards=(0.2, 0.5))
    body = client_user.get(reverse("training:run-history-csv", args=[run.pk])).content.decode()
    assert [line.split(",")[0] for line in body.splitlines()] == ["epoch", "1", "2"]


def test_metric_checkboxes_are_not_nested_in_one_label(client_user, program):
    html = client_user.get(reverse("training:run-create")).content.decode()
    start = html.index('id="field-metrics"')
    block = html[start : html.index("</div>", start)]
    assert block.count("<label") == block.count("</label>")
    assert '<label for="id_metrics' in block or "<label>Metrics</label>" in block
    # each checkbox has its own label, none of them wraps the others
    assert block.index("Metrics</label>") < block.index('value="F1Score"')
