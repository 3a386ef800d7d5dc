"""Every model a run calls goes only where the program points, with that address's key.

A program on a saved endpoint (a real listener on loopback) is run with OMEGA's mutation model
and an LM judge left empty, or naming the program's own model: their requests reach the
endpoint with its key. A second listener stands in for the provider's public API (the address
``openai/…`` goes to with no API base): it must see nothing. A model with no API base whose
provider's default address is on this machine (``ollama/…``, ``llamafile/…``) is refused like
a raw loopback API base typed on a program.
"""

from __future__ import annotations

import pytest

from tests.training.conftest import make_run, run_config
from training.execution import attempt as execution
from training.models import Run
from training.programs.lm import ModelStringError, make_embedding_model, make_language_model

from .test_server_keys import ENDPOINT_KEY, SERVER_KEY, Listener, on_endpoint

pytestmark = pytest.mark.django_db(transaction=True)

PROGRAM_MODEL = "openai/gpt-4o-mini"
#: The opening words of a mutation's and of a judge's instructions (how their requests are told
#: from the program's predictions).
MUTATION = "You improve one variable of an AI program"
JUDGE = "You are a strict grader"


@pytest.fixture
def endpoint_and_public(monkeypatch):
    """(the saved endpoint's listener, the public API's stand-in) with the server's key in
    the environment, as a worker holding a provider key has it."""
    endpoint, public = Listener(), Listener()
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("OPENAI_API_BASE", public.url)
    yield endpoint, public
    for server in (endpoint, public):
        server.shutdown()
        server.server_close()


def bodies(listener: Listener) -> list[str]:
    return [request["body"] for request in listener.requests]


def one_epoch(**overrides) -> dict:
    settings = {"epochs": 1, "evaluations_before": 0, "evaluations_after": 0, **overrides}
    return run_config(model=PROGRAM_MODEL, **settings)


@pytest.mark.parametrize("named", ["", PROGRAM_MODEL])
def test_omegas_mutations_go_to_the_programs_endpoint_with_its_key(
    user, demo_dataset, endpoint_and_public, named
):
    endpoint, public = endpoint_and_public
    program = on_endpoint(user, demo_dataset, endpoint, key=ENDPOINT_KEY)
    config = one_epoch(
        optimizer="OMEGA",
        omega_language_model=named,
        omega_embedding_model="fake/embedder",
        omega_population_size=2,
    )
    run = make_run(user, program, demo_dataset, config)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    mutations = [body for body in bodies(endpoint) if MUTATION in body]
    assert mutations, "OMEGA asked for no mutation at the endpoint"
    keys = {request["headers"].get("Authorization") for request in endpoint.requests}
    assert keys == {f"Bearer {ENDPOINT_KEY}"}
    assert public.requests == []


@pytest.mark.parametrize("named", ["", PROGRAM_MODEL])
def test_an_lm_judge_goes_to_the_programs_endpoint_with_its_key(
    user, demo_dataset, endpoint_and_public, named
):
    endpoint, public = endpoint_and_public
    program = on_endpoint(user, demo_dataset, endpoint, key=ENDPOINT_KEY)
    config = one_epoch(reward="LMAsJudge", reward_language_model=named)
    run = make_run(user, program, demo_dataset, config)
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    judged = [body for body in bodies(endpoint) if JUDGE in body]
    assert judged, "the judge asked nothing at the endpoint"
    assert not endpoint.saw(SERVER_KEY)
    assert public.requests == []


@pytest.mark.parametrize(
    ("model", "address"),
    [
        ("ollama/llama3", "http://localhost:11434"),
        ("ollama_chat/llama3", "http://localhost:11434"),
        ("llamafile/model", "http://127.0.0.1:8080/v1"),
        ("xinference/model", "http://127.0.0.1:9997/v1"),
    ],
)
def test_a_providers_default_address_on_this_machine_is_refused_like_a_typed_one(model, address):
    with pytest.raises(ModelStringError, match="save that server as an endpoint") as refused:
        make_language_model(model)
    assert address in str(refused.value)


def test_an_environment_base_on_this_machine_is_refused_for_language_and_embedding_models(
    monkeypatch,
):
    monkeypatch.setenv("OPENAI_API_BASE", "http://10.0.0.7:8000/v1")
    with pytest.raises(ModelStringError, match="10.0.0.7"):
        make_language_model("openai/gpt-4o-mini")
    with pytest.raises(ModelStringError, match="10.0.0.7"):
        make_embedding_model("openai/text-embedding-3-small")
    monkeypatch.delenv("OPENAI_API_BASE")
    assert make_language_model("openai/gpt-4o-mini").model == "openai/gpt-4o-mini"


def test_a_judge_rescore_naming_the_programs_model_goes_to_its_endpoint(
    user, demo_dataset, endpoint_and_public
):
    from training.insight import rescoring

    endpoint, public = endpoint_and_public
    program = on_endpoint(user, demo_dataset, endpoint, key=ENDPOINT_KEY)
    run = make_run(user, program, demo_dataset, one_epoch(evaluations_after=1))
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    before = len(endpoint.requests)
    spec = {**rescoring.reward_spec(run, "LMAsJudge"), "language_model": PROGRAM_MODEL}
    spec["criteria"] = "the right team"
    rescoring.rescore(run, run.dataset, spec, allow_model=True)
    judged = [r for r in endpoint.requests[before:] if JUDGE in r["body"]]
    assert judged and all(r["headers"]["Authorization"] == f"Bearer {ENDPOINT_KEY}" for r in judged)
    assert public.requests == []
