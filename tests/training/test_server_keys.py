"""A listener that must never see the server key (issue 18.1).

The worker holds ``OPENAI_API_KEY``; a program on ``openai/gpt-4o-mini`` whose ``api_base``
points at a user's own listener must not carry that key there: the run is refused with a
clear message before any request, the program and launch forms refuse it too, and an
imported program cannot bring a test fake (or any other LM class) into a run.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

import training.engine as synalinks
from training.engine.data_model import create_data_model
from training.execution import attempt as execution
from training.models import Program, Run
from training.programs.forms import ProgramForm
from training.programs.programs import ProgramError, program_from_json
from training.runs.forms import RunForm

from .conftest import make_run, run_config

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_KEY = "sk-server-held-0123456789abcdef"


class Listener(ThreadingHTTPServer):
    """Records every request; answers like an OpenAI chat completion (so a leak would work)."""

    def __init__(self):
        self.requests: list[dict] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def saw(self, text: str) -> bool:
        return any(text in json.dumps(request) for request in self.requests)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append({"headers": dict(self.headers), "body": body.decode()})
        answer = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": '{"team": "bug"}'},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def listener(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    server = Listener()
    yield server
    server.shutdown()
    server.server_close()


def program_document(dataset, language_model) -> dict:
    """The engine document of a program on ``dataset`` using ``language_model`` as is."""
    program = synalinks.Sequential(
        [
            synalinks.Input(data_model=create_data_model("In", dataset.input_schema_fields())),
            synalinks.Generator(
                data_model=create_data_model("Out", dataset.target_schema_fields()),
                language_model=language_model,
            ),
        ],
        name="imported",
    )
    return program.get_config()


def stored_program(user, dataset, language_model) -> Program:
    """A program row as an import stored it (built in code: no form check on the way)."""
    document = program_document(dataset, language_model)
    return Program.objects.create(
        owner=user,
        name="Imported",
        dataset=dataset,
        model=language_model.model,
        engine_json=document,
    )


def small_config():
    return run_config(epochs=1, evaluations_before=1, evaluations_after=0)


def test_the_run_is_refused_and_the_listener_never_sees_the_key(
    user, demo_dataset, listener, settings
):
    settings.TRAINBOARD_ALLOWED_API_BASES = ""
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base=listener.url, retries=0)
    program = stored_program(user, demo_dataset, lm)
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert run.error.startswith("This program cannot run here: api_base ")
    assert "TRAINBOARD_ALLOWED_API_BASES" in run.error
    assert listener.requests == []
    assert not listener.saw(SERVER_KEY)


def test_an_endpoint_the_administrator_lists_does_get_the_key(
    user, demo_dataset, listener, settings
):
    """The control: the same run reaches the listener (with the key) once it is listed, so
    the test above would see a leak."""
    settings.TRAINBOARD_ALLOWED_API_BASES = listener.url
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base=listener.url, retries=0)
    program = stored_program(user, demo_dataset, lm)
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    assert listener.saw(f"Bearer {SERVER_KEY}")


def test_the_program_form_refuses_an_unlisted_api_base(user, demo_dataset, listener, settings):
    settings.TRAINBOARD_ALLOWED_API_BASES = ""
    form = ProgramForm(
        data={
            "name": "Leaky",
            "dataset": demo_dataset.pk,
            "module": "Generator",
            "model": "openai/gpt-4o-mini",
            "api_base": listener.url,
            "temperature": 0.0,
        },
        user=user,
    )
    assert not form.is_valid()
    assert "TRAINBOARD_ALLOWED_API_BASES" in form.errors["api_base"][0]


def test_the_launch_form_refuses_a_stored_program_with_an_unlisted_api_base(
    user, demo_dataset, listener, settings
):
    settings.TRAINBOARD_ALLOWED_API_BASES = ""
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base=listener.url)
    program = stored_program(user, demo_dataset, lm)
    form = RunForm(
        data={"program": program.pk, "dataset": demo_dataset.pk, "reward": "ExactMatch"},
        user=user,
    )
    assert not form.is_valid()
    assert "TRAINBOARD_ALLOWED_API_BASES" in form.errors["program"][0]


def test_an_imported_program_cannot_carry_a_test_fake_under_a_real_model_name(demo_dataset):
    fake = synalinks.testing.FakeLanguageModel(model="openai/gpt-4o-mini", latency=1e308)
    document = program_document(demo_dataset, fake)
    with pytest.raises(ProgramError, match="class 'synalinks>FakeLanguageModel' is not allowed"):
        program_from_json(document)


def test_a_stored_program_whose_api_base_is_refused_still_has_its_page(
    user, demo_dataset, client, settings
):
    settings.TRAINBOARD_ALLOWED_API_BASES = ""
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base="http://10.1.2.3:8000/v1")
    program = stored_program(user, demo_dataset, lm)
    client.force_login(user)
    response = client.get(reverse("training:program-detail", args=[program.pk]))
    assert response.status_code == 200
    assert "This program cannot run here: api_base &#x27;http://10.1.2.3:8000/v1&#x27;" in (
        response.content.decode()
    )
