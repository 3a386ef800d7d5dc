"""``GET /api/runs/{id}/export/plain-prompts`` against the live stack: the owner gets the
trained program as plain prompts, another member a 404 like a missing run, no token a 401;
the route is in the OpenAPI schema."""

from __future__ import annotations

import requests

from tests.browser.helpers_runs import demo_program, tiny_dataset_id
from tests.web.test_api import api, other_member_token, settings_token, until_finished

ROUTE = "/api/runs/{run_id}/export/plain-prompts"


def test_the_plain_prompt_export_is_the_owners_alone(live_stack):
    token, _ = settings_token(live_stack, "plain prompts")
    _, program_id = demo_program(live_stack, "api plain prompts", "fake/keywords")
    launched = api(live_stack, token, "POST", "runs/",
                   json={"program": program_id, "dataset": tiny_dataset_id(live_stack),
                         "epochs": 1})  # fmt: skip
    assert launched.status_code == 201, launched.text
    run_id = launched.json()["id"]
    assert until_finished(live_stack, token, run_id)["status"] == "succeeded"
    path = f"runs/{run_id}/export/plain-prompts"

    answer = api(live_stack, token, "GET", path)
    assert answer.status_code == 200, answer.text
    export = answer.json()
    assert export["format"] == "trainboard-plain-prompts" and export["version"] == 1
    [module] = export["modules"]
    assert module["messages"][0]["role"] == "system"
    assert module["language_model"]["config"]["model"] == "fake/keywords"
    assert "api_key" not in answer.text

    theirs = api(live_stack, other_member_token(live_stack), "GET", path)
    assert theirs.status_code == 404
    assert theirs.json() == {"detail": "Not found (or not yours).", "field": None}
    assert api(live_stack, None, "GET", path).status_code == 401
    missing = api(live_stack, token, "GET", "runs/999999/export/plain-prompts")
    assert missing.status_code == 404

    schema = requests.get(live_stack.url + "api/openapi.json", timeout=10).json()
    documented = schema["paths"][ROUTE]["get"]
    assert documented["summary"] == "The trained program as plain prompts"
    assert "not_plain" in documented["description"]
