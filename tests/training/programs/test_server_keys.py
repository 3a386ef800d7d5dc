"""A listener that must never see the server key.

The worker holds ``OPENAI_API_KEY``; a program on a saved endpoint (a real HTTP listener on
loopback) runs end to end and the listener sees the endpoint's own key or no credential at
all, never the server's; the key is stored encrypted and appears in no stored row, export or
page. A raw loopback API base typed on a program is refused before any request (only a saved
endpoint may be private), as is everything when the administrator turns private endpoints
off; an imported program cannot bring a test fake (or any other LM class) into a run.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import serializers
from django.urls import reverse

import training.engine as synalinks
from tests.training.conftest import make_run, run_config
from training import models as training_models
from training.engine.data_model import create_data_model
from training.execution import attempt as execution
from training.models import Endpoint, Program, Run
from training.programs import saved_endpoints
from training.programs.forms import ProgramForm
from training.programs.programs import ProgramError, program_from_json
from training.runs.forms import RunForm

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_KEY = "sk-server-held-0123456789abcdef"
ENDPOINT_KEY = "endpoint-own-key-9f8e7d6c"


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
    def do_GET(self):  # noqa: N802 - http.server's name
        self.server.requests.append({"headers": dict(self.headers), "body": ""})
        answer = json.dumps({"object": "list", "data": [{"id": "smollm2"}, {"id": "<b>x</b>"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

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


def on_endpoint(user, dataset, listener, key="", name="lab") -> Program:
    """A program row on a saved endpoint at the listener, as the program form stores it."""
    saved_endpoints.save(user, name, listener.url, key)
    lm = synalinks.LanguageModel(
        model="openai/gpt-4o-mini", api_base=listener.url, endpoint=name, retries=0
    )
    return stored_program(user, dataset, lm)


def everything_stored() -> str:
    """Every row of every training table, as JSON text."""
    rows = []
    for model in (
        Program, training_models.ProgramVersion, Run, training_models.EpochLog,
        training_models.Candidate, training_models.Evaluation, training_models.LMCallTrace,
        training_models.EvaluationExample, Endpoint,
    ):  # fmt: skip
        rows.append(serializers.serialize("json", model.objects.all()))
    return "\n".join(rows)


def test_a_run_on_a_saved_endpoint_sends_no_server_key_and_no_credential(
    user, demo_dataset, listener
):
    program = on_endpoint(user, demo_dataset, listener)
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    assert listener.requests  # the run really went there
    assert not listener.saw(SERVER_KEY)
    assert all("Authorization" not in request["headers"] for request in listener.requests)


def test_the_endpoints_own_key_goes_there_and_is_stored_nowhere_in_clear(
    user, demo_dataset, listener, client, caplog
):
    caplog.set_level(logging.DEBUG)  # every logger, litellm's and httpx's included
    program = on_endpoint(user, demo_dataset, listener, key=ENDPOINT_KEY)
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    assert listener.saw(f"Bearer {ENDPOINT_KEY}") and not listener.saw(SERVER_KEY)
    endpoint = Endpoint.objects.get(name="lab")
    assert endpoint.encrypted_key and ENDPOINT_KEY not in endpoint.encrypted_key
    assert ENDPOINT_KEY not in everything_stored()
    assert caplog.records and ENDPOINT_KEY not in caplog.text
    client.force_login(user)
    export = client.get(reverse("training:program-export", args=[program.pk])).content.decode()
    assert '"endpoint": "lab"' in export and ENDPOINT_KEY not in export
    pages = [
        client.get(reverse("training:run-detail", args=[run.pk])),
        client.get(reverse("training:endpoints")),
        client.get(reverse("training:program-detail", args=[program.pk])),
    ]
    for page in pages:
        assert page.status_code == 200
        assert ENDPOINT_KEY not in page.content.decode()


def test_a_raw_loopback_api_base_is_refused_before_any_request(user, demo_dataset, listener):
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base=listener.url, retries=0)
    program = stored_program(user, demo_dataset, lm)
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert run.error.startswith("This program cannot run here: api_base ")
    assert "save it as an endpoint" in run.error
    assert listener.requests == []


def test_private_endpoints_turned_off_refuse_the_run_before_any_request(
    user, demo_dataset, listener, settings
):
    program = on_endpoint(user, demo_dataset, listener)
    settings.TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS = False
    run = make_run(user, program, demo_dataset, small_config())
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    run.refresh_from_db()
    assert "TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS is off" in run.error
    assert listener.requests == []


def test_the_program_form_puts_the_program_on_a_saved_endpoint(user, demo_dataset, listener):
    endpoint = saved_endpoints.save(user, "lab", listener.url, ENDPOINT_KEY)
    form = ProgramForm(
        data={
            "name": "On my server",
            "dataset": demo_dataset.pk,
            "module": "Generator",
            "model": "openai/smollm2",
            "endpoint": endpoint.pk,
            "temperature": 0.0,
        },
        user=user,
    )
    assert form.is_valid(), form.errors
    config = json.dumps(form.engine_program.get_config())
    assert '"endpoint": "lab"' in config and listener.url in config
    assert ENDPOINT_KEY not in config


def test_the_program_form_refuses_a_raw_loopback_api_base(user, demo_dataset, listener):
    form = ProgramForm(
        data={
            "name": "Raw",
            "dataset": demo_dataset.pk,
            "module": "Generator",
            "model": "openai/gpt-4o-mini",
            "api_base": listener.url,
            "temperature": 0.0,
        },
        user=user,
    )
    assert not form.is_valid()
    assert "save it as an endpoint" in form.errors["api_base"][0]


def test_the_launch_form_refuses_a_program_on_an_endpoint_its_owner_lacks(
    user, other_user, demo_dataset, listener
):
    saved_endpoints.save(other_user, "theirs", listener.url)
    lm = synalinks.LanguageModel(
        model="openai/gpt-4o-mini", api_base=listener.url, endpoint="theirs"
    )
    program = stored_program(user, demo_dataset, lm)
    form = RunForm(
        data={"program": program.pk, "dataset": demo_dataset.pk, "reward": "ExactMatch"},
        user=user,
    )
    assert not form.is_valid()
    assert "endpoint 'theirs', which is not saved here" in form.errors["program"][0]


def test_an_imported_program_cannot_carry_a_test_fake_under_a_real_model_name(demo_dataset):
    fake = synalinks.testing.FakeLanguageModel(model="openai/gpt-4o-mini", latency=1e308)
    document = program_document(demo_dataset, fake)
    with pytest.raises(ProgramError, match="class 'synalinks>FakeLanguageModel' is not allowed"):
        program_from_json(document)


def test_a_stored_program_whose_api_base_is_refused_still_has_its_page(user, demo_dataset, client):
    lm = synalinks.LanguageModel(model="openai/gpt-4o-mini", api_base="http://10.1.2.3:8000/v1")
    program = stored_program(user, demo_dataset, lm)
    client.force_login(user)
    response = client.get(reverse("training:program-detail", args=[program.pk]))
    assert response.status_code == 200
    assert "api_base &#x27;http://10.1.2.3:8000/v1&#x27; is a loopback or private address" in (
        response.content.decode()
    )


def test_test_connection_lists_the_models_with_the_endpoints_key_only(user, listener, client):
    endpoint = saved_endpoints.save(user, "lab", listener.url, ENDPOINT_KEY)
    client.force_login(user)
    page = client.post(reverse("training:endpoint-test", args=[endpoint.pk])).content.decode()
    assert "Connected." in page and "<code>smollm2</code>" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page  # a server's model names are escaped
    assert ENDPOINT_KEY not in page
    (request,) = listener.requests
    assert request["headers"]["Authorization"] == f"Bearer {ENDPOINT_KEY}"


def test_an_endpoint_with_a_metadata_address_cannot_be_saved(user, client):
    client.force_login(user)
    response = client.post(
        reverse("training:endpoint-create"),
        {"name": "meta", "url": "http://169.254.169.254/latest", "key": ""},
    )
    assert response.status_code == 400
    assert "link-local, metadata" in response.content.decode()
    assert not Endpoint.objects.exists()


def test_others_cannot_test_or_delete_an_endpoint(user, other_user, listener, client):
    endpoint = saved_endpoints.save(user, "mine", listener.url, ENDPOINT_KEY)
    client.force_login(other_user)
    assert client.post(reverse("training:endpoint-test", args=[endpoint.pk])).status_code == 404
    assert client.post(reverse("training:endpoint-delete", args=[endpoint.pk])).status_code == 404
    assert "mine" not in client.get(reverse("training:endpoints")).content.decode()
    assert listener.requests == []


def test_an_administrators_shared_endpoint_serves_everyone_but_only_staff_delete_it(
    user, other_user, listener, client
):
    user.is_staff = True
    user.save()
    shared = saved_endpoints.save(user, "team", listener.url, ENDPOINT_KEY, shared=True)
    with pytest.raises(saved_endpoints.EndpointError, match="only an administrator"):
        saved_endpoints.save(other_user, "mine", listener.url, shared=True)
    assert saved_endpoints.resolve(other_user, "team") == shared
    own = saved_endpoints.save(other_user, "team", listener.url)  # their own wins by name
    assert saved_endpoints.resolve(other_user, "team") == own
    client.force_login(other_user)
    assert client.post(reverse("training:endpoint-delete", args=[shared.pk])).status_code == 404
    page = client.get(reverse("training:endpoints")).content.decode()
    assert page.count(">team<") == 2 and ENDPOINT_KEY not in page
