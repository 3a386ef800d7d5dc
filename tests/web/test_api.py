"""The JSON API against the live stack (daphne, a Celery worker, the real database), with a real
HTTP client: a token made in Settings and revoked there, every route's ownership and
validation, and a run launched, followed and downloaded through the API alone."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time

import requests

from tests.browser.helpers_runs import demo_program, shell, tiny_dataset_id
from tests.web.test_body_limits import live_session, logged_in, raw_post

CSV = "text,label\n" + "".join(
    f"{word} message number {i},{'yes' if i % 2 else 'no'}\n"
    for i, word in enumerate(["refund", "crash", "parcel", "login", "invoice", "tracking"] * 4)
)
MAPPING = [
    {"column": "text", "role": "input", "name": "text", "type": "str"},
    {"column": "label", "role": "target", "name": "label", "type": "label set"},
]


def settings_token(live_stack, name: str) -> tuple[str, requests.Session]:
    """A token made on the Settings page as a member would (the page shows it once)."""
    session = logged_in(live_stack)
    page = session.get(live_stack.url + "settings/", timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    made = session.post(
        live_stack.url + "settings/tokens/",
        data={"name": name, "csrfmiddlewaretoken": csrf},
        headers={"Referer": live_stack.url + "settings/", "X-CSRFToken": csrf},
        timeout=10,
    )
    assert made.status_code == 200, made.text[:300]
    token = html.unescape(
        re.search(r'<code class="token-value">([^<]+)</code>', made.text).group(1)
    )
    return token, session


def other_member_token(live_stack) -> str:
    """A second member with a token of their own (made by the token service)."""
    return shell(
        live_stack,
        "from django.contrib.auth import get_user_model as g; from api import tokens;"
        "u, _ = g().objects.get_or_create(username='api-other');"
        "print(tokens.create_token(u, 'theirs')[1])",
    )


def api(live_stack, token: str | None, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.request(
        method, live_stack.url + "api/" + path, headers=headers, timeout=30, **kwargs
    )


def until_finished(live_stack, token: str, run_id: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api(live_stack, token, "GET", f"runs/{run_id}").json()
        if run["status"] in ("succeeded", "failed", "cancelled", "stopped"):
            return run
        time.sleep(0.5)  # the API has no push channel: polling is what a script does
    raise AssertionError(f"run {run_id} did not finish within {timeout} s")


def test_a_token_made_in_settings_works_until_it_is_revoked(live_stack):
    token, session = settings_token(live_stack, "laptop")
    assert token.startswith("tb_")
    assert api(live_stack, token, "GET", "datasets/").status_code == 200
    stored = shell(
        live_stack,
        "from api.models import ApiToken; t = ApiToken.objects.filter(name='laptop').latest('pk');"
        "print(t.digest, t.last_used is not None)",
    )
    digest, used = stored.split()
    assert used == "True" and token not in stored and len(digest) == 64
    page = session.get(live_stack.url + "settings/", timeout=10)
    assert "laptop" in page.text and token not in page.text  # listed, never shown again
    token_pk = shell(
        live_stack,
        "from api.models import ApiToken; print(ApiToken.objects.filter(name='laptop').latest('pk').pk)",
    )
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    revoked = session.post(
        live_stack.url + f"settings/tokens/{token_pk}/revoke/",
        data={"csrfmiddlewaretoken": csrf},
        headers={"Referer": live_stack.url + "settings/"},
        timeout=10,
        allow_redirects=False,
    )
    assert revoked.status_code == 302
    refused = api(live_stack, token, "GET", "datasets/")
    assert refused.status_code == 401
    assert refused.json()["detail"].startswith("A live personal token is needed")


def test_a_deactivated_members_token_is_refused(live_stack):
    token = shell(
        live_stack,
        "from django.contrib.auth import get_user_model as g; from api import tokens;"
        "u, _ = g().objects.get_or_create(username='api-leaver');"
        "print(tokens.create_token(u, 'old laptop')[1])",
    )
    assert api(live_stack, token, "GET", "runs/").status_code == 200
    shell(
        live_stack,
        "from django.contrib.auth import get_user_model as g;"
        "g().objects.filter(username='api-leaver').update(is_active=False); print('ok')",
    )
    assert api(live_stack, token, "GET", "runs/").status_code == 401


def test_requests_without_a_live_token_are_refused_as_json(live_stack):
    for token in (None, "tb_1.forged:signature", "not-a-token"):
        answer = api(live_stack, token, "GET", "runs/")
        assert answer.status_code == 401
        assert answer.headers["Content-Type"].startswith("application/json")
    # a session cookie is not a token: the pages' login does not open the API
    cookie = {"Cookie": live_session(live_stack)}
    assert requests.get(live_stack.url + "api/runs/", headers=cookie, timeout=10).status_code == 401


def test_no_route_shows_or_changes_another_members_data(live_stack):
    token, _ = settings_token(live_stack, "owner")
    dataset_id, program_id = demo_program(live_stack, "api ownership", "fake/keywords")
    run_id = api(
        live_stack,
        token,
        "POST",
        "runs/",
        json={"program": program_id, "dataset": dataset_id, "epochs": 1, "evaluations_before": 0},
    ).json()["id"]
    theirs = other_member_token(live_stack)
    for method, path in [
        ("GET", f"datasets/{dataset_id}"),
        ("GET", f"programs/{program_id}"),
        ("GET", f"programs/{program_id}/export"),
        ("GET", f"runs/{run_id}"),
        ("GET", f"runs/{run_id}/history"),
        ("GET", f"runs/{run_id}/candidates"),
        ("GET", f"runs/{run_id}/examples"),
        ("GET", f"runs/{run_id}/traces"),
        ("GET", f"runs/{run_id}/program"),
        ("POST", f"runs/{run_id}/cancel"),
        ("POST", f"runs/{run_id}/pause"),
        ("POST", f"runs/{run_id}/resume"),
        ("POST", f"runs/{run_id}/events"),
    ]:
        answer = api(live_stack, theirs, method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json() == {"detail": "Not found (or not yours).", "field": None}
    assert all(d["id"] != dataset_id for d in api(live_stack, theirs, "GET", "datasets/").json())
    assert api(live_stack, theirs, "GET", "runs/").json() == []
    # nor launch on them: the form's own ownership check, with its field
    launched = api(
        live_stack, theirs, "POST", "runs/", json={"program": program_id, "dataset": dataset_id}
    )
    assert launched.status_code == 400 and launched.json()["field"] == "program"
    until_finished(live_stack, token, run_id)


def test_bad_values_are_answered_with_their_field_and_nothing_is_kept(live_stack):
    token, _ = settings_token(live_stack, "validation")
    before = len(api(live_stack, token, "GET", "datasets/").json())
    cases = [
        ({"name": "x", "mapping": "not json"}, "mapping", "mapping is not JSON"),
        ({"name": "x", "mapping": json.dumps([{"column": "nope", "role": "input", "name": "a"}])},
         "mapping", "does not exist in the file"),
        ({"name": " ", "mapping": json.dumps(MAPPING)}, "name", "Give the dataset a name."),
        ({"name": "x", "mapping": json.dumps(MAPPING), "test_ratio": "1.5"}, "test_ratio",
         "The test ratio must be between"),
    ]  # fmt: skip
    for form, field, words in cases:
        answer = api(live_stack, token, "POST", "datasets/", data=form,
                     files={"file": ("rows.csv", CSV.encode(), "text/csv")})  # fmt: skip
        assert answer.status_code == 400, answer.text
        assert answer.json()["field"] == field and words in answer.json()["detail"]
    assert len(api(live_stack, token, "GET", "datasets/").json()) == before
    dataset_id, program_id = demo_program(live_stack, "api validation", "fake/keywords")
    for body, field in [
        ({"program": program_id, "dataset": dataset_id, "epochs": 0}, "epochs"),
        ({"program": program_id, "dataset": dataset_id, "optimizer": "Nope"}, "optimizer"),
        ({"program": 10**9, "dataset": dataset_id}, "program"),
    ]:
        answer = api(live_stack, token, "POST", "runs/", json=body)
        assert answer.status_code == 400 and answer.json()["field"] == field, answer.text
    assert api(live_stack, token, "POST", "runs/", data="[1]").json()["detail"] == (
        "the body is a JSON object of the launch form's fields"
    )
    typo = api(live_stack, token, "POST", "runs/", json={"program": program_id, "epoch": 1})
    assert typo.json() == {"detail": "'epoch' is not a field of the launch form", "field": "epoch"}
    unnamed = api(live_stack, token, "POST", "runs/", json={"epochs": 1})
    assert (unnamed.status_code, unnamed.json()["field"]) == (400, "program")
    deep = api(live_stack, token, "POST", "runs/", data="[" * 3000 + "]" * 3000)
    assert deep.status_code == 400 and "nests deeper" in deep.json()["detail"]
    assert api(live_stack, token, "GET", f"programs/{program_id}/export?version=99").json() == {
        "detail": "the program has no version 99",
        "field": "version",
    }


def test_a_dataset_uploaded_and_a_run_launched_followed_and_downloaded_by_api(live_stack, tmp_path):
    token, _ = settings_token(live_stack, "pipeline")
    uploaded = api(live_stack, token, "POST", "datasets/",
                   data={"name": "api yes-no", "mapping": json.dumps(MAPPING), "test_ratio": "0.25"},
                   files={"file": ("rows.csv", CSV.encode(), "text/csv")})  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    dataset = uploaded.json()
    assert (dataset["rows"], dataset["train_rows"], dataset["test_rows"]) == (24, 18, 6)
    _, program_id = demo_program(live_stack, "api pipeline", "fake/keywords")
    tiny = tiny_dataset_id(live_stack)
    launched = api(live_stack, token, "POST", "runs/",
                   json={"program": program_id, "dataset": tiny, "epochs": 1})  # fmt: skip
    assert launched.status_code == 201, launched.text
    run = launched.json()
    assert run["status"] == "queued" and run["forecast"]["calls"]["expected"] > 0
    assert run["url"].endswith(f"/runs/{run['id']}/")
    finished = until_finished(live_stack, token, run["id"])
    assert finished["status"] == "succeeded", finished["error"]
    assert finished["test_reward_before"] is not None and finished["test_reward_after"] is not None
    history = api(live_stack, token, "GET", f"runs/{run['id']}/history").json()
    assert [h["epoch"] for h in history] == [1]
    candidates = api(live_stack, token, "GET", f"runs/{run['id']}/candidates").json()
    assert any(c["operation"] == "seed" for c in candidates)
    examples = api(live_stack, token, "GET", f"runs/{run['id']}/examples").json()
    assert examples["total"] == 2 and {"prediction_after", "reward_after"} <= set(
        examples["rows"][0]
    )
    traces = api(live_stack, token, "GET", f"runs/{run['id']}/traces").json()
    assert traces["total"] == len(traces["calls"]) > 0
    assert "prediction" in {call["role"] for call in traces["calls"]}
    document = api(live_stack, token, "GET", f"runs/{run['id']}/program").json()
    path = tmp_path / "trained.json"
    path.write_text(json.dumps(document))
    import training.engine as synalinks

    loaded = synalinks.Program.load(str(path))
    assert loaded.trainable_variables  # the trained program loads in code
    refused = api(live_stack, token, "POST", f"runs/{run['id']}/pause")
    assert refused.status_code == 409 and refused.json()["field"] is None


def test_a_token_lifts_the_visitors_body_limit_in_daphne(live_stack):
    token, _ = settings_token(live_stack, "big upload")
    size = int(live_stack.env.get("TRAINBOARD_ANONYMOUS_BODY_MAX_BYTES") or 64 * 1024) * 2
    head = {
        "Content-Length": str(size),
        "Content-Type": "application/octet-stream",
        "Connection": "close",
    }
    for forged in (None, "tb_1.made-up:signature"):
        auth = {"Authorization": f"Bearer {forged}"} if forged else {}
        status, text, _, _ = raw_post(live_stack, "/api/datasets/", {**head, **auth})
        assert status == "HTTP/1.1 413 Content Too Large" and "not logged in" in text
    status, text, _, sent = raw_post(
        live_stack, "/api/datasets/", {**head, "Authorization": f"Bearer {token}"}, size
    )
    # the whole body was read and the API itself answered: a file is required
    assert sent == size and status.startswith("HTTP/1.1 422 ")
    assert '"field": "file"' in text
    # a fit streamed from code posts its rows and batches of events past that limit too
    status, text, _, sent = raw_post(
        live_stack, "/api/runs/from-code", {**head, "Authorization": f"Bearer {token}"}, size
    )
    assert sent == size and status.startswith("HTTP/1.1 400 ") and "JSON" in text


def test_the_docs_page_and_schema_are_served(live_stack):
    schema = requests.get(live_stack.url + "api/openapi.json", timeout=10).json()
    assert schema["info"]["title"] == "Trainboard API"
    assert {"/api/runs/", "/api/datasets/", "/api/programs/import"} <= set(schema["paths"])
    docs = requests.get(live_stack.url + "api/docs", timeout=10)
    assert docs.status_code == 200 and "swagger-ui-bundle.js" in docs.text


def test_the_ci_command_launches_waits_and_exits_with_the_verdict(live_stack):
    token, _ = settings_token(live_stack, "ci")
    _, program_id = demo_program(live_stack, "api ci", "fake/fewshot")
    tiny = tiny_dataset_id(live_stack, train=8, test=6)
    command = [sys.executable, "scripts/trainboard_run.py", "--url", live_stack.url,
               "--program", str(program_id), "--dataset", str(tiny), "--timeout", "240"]  # fmt: skip
    env = {**os.environ, "TRAINBOARD_TOKEN": token}
    done = subprocess.run(
        [*command, "--set", "epochs=1"], env=env, capture_output=True, text=True, timeout=300
    )
    run_id = int(re.search(r"^Run (\d+): ", done.stdout, re.M).group(1))
    run = api(live_stack, token, "GET", f"runs/{run_id}").json()
    assert run["status"] == "succeeded" and run["url"] in done.stdout
    assert done.returncode == (0 if run["outcome"] == "improved" else 1), done.stdout
    assert run["outcome"].replace("_", " ") in done.stdout
    refused = subprocess.run(
        [*command, "--set", "epochs=0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2 and "Not launched (epochs)" in refused.stderr
    missing = subprocess.run(
        command, env={**env, "TRAINBOARD_TOKEN": ""}, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and "TRAINBOARD_TOKEN" in missing.stderr


def test_a_served_program_answers_validates_and_shows_its_traffic(live_stack):
    token, session = settings_token(live_stack, "served")
    _, program_id = demo_program(live_stack, "api served", "fake/keywords")
    path = f"programs/{program_id}/predict"
    answer = api(live_stack, token, "POST", path, json={"message": "I want a refund"})
    assert answer.status_code == 200, answer.text
    served = answer.json()
    assert set(served["outputs"]) == {"team"} and served["lm_calls"] == 1
    for body, status, field in [
        ({}, 400, "message"),
        ({"message": ["not", "text"]}, 400, "message"),
        ([1, 2], 400, None),
    ]:
        refused = api(live_stack, token, "POST", path, json=body)
        assert (refused.status_code, refused.json()["field"]) == (status, field), refused.text
    deep = "[" * 50 + "]" * 50
    refused = api(live_stack, token, "POST", path, data=deep)
    assert refused.status_code == 400 and "nests deeper" in refused.json()["detail"]
    missing = api(live_stack, token, "POST", path + "?version=9", json={"message": "x"})
    assert (missing.status_code, missing.json()["field"]) == (404, "version")
    theirs = other_member_token(live_stack)
    assert api(live_stack, theirs, "POST", path, json={"message": "x"}).status_code == 404
    page = session.get(live_stack.url + f"programs/{program_id}/", timeout=10)
    assert "1 request in the last 7 days" in page.text
    assert '<td data-label="Token">served</td>' in page.text
    for body in (b'{"message": NaN}', b'{"message": "\\ud800"}'):
        refused = api(live_stack, token, "POST", path, data=body)
        assert refused.status_code == 400, refused.text  # refused before any LM call


def test_a_token_past_its_rate_is_answered_429(live_stack):
    token, _ = settings_token(live_stack, "busy")
    rate = int(live_stack.env.get("TRAINBOARD_API_RATE", "120/min").split("/")[0])
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {token}"
        codes = [
            session.get(live_stack.url + "api/datasets/", timeout=10).status_code
            for _ in range(rate)
        ]
        over = session.get(live_stack.url + "api/datasets/", timeout=10)
    assert codes == [200] * rate
    assert over.status_code == 429 and int(over.headers["Retry-After"]) > 0
