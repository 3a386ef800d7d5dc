"""A model string that cannot work is reported on the field it was typed in, never a 500
and never a run that "succeeds" with every LM call failed: an unknown provider
(``nosuch/model``), an unknown local model (``local/nosuch``), a bare name on OMEGA's or a
judge's model field. Known providers still build without a network."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.training.test_views import launch_data
from training.models import Program, Run
from training.programs.lm import ModelStringError, make_embedding_model, make_language_model
from training.programs.programs import ProgramError, build_engine_program


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
    for model in ("openai/gpt-4o-mini", "hosted_vllm/my-model"):
        assert make_language_model(model).model == model
    assert (
        make_language_model(
            "ollama/llama3", api_base="http://127.0.0.1:11434", endpoint="lab"
        ).model
        == "ollama/llama3"
    )
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
