"""Program import is bounded before any work: size, nesting, field count,
non-finite numbers and lone surrogates each get a clear 400, never a 500 or a minute of CPU.
"""

from __future__ import annotations

import copy
import html
import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from training.engine.data_model import MAX_FIELDS
from training.models import Program
from training.programs.programs import IMPORT_MAX_NESTING

pytestmark = pytest.mark.django_db


def post_import(client, raw: bytes):
    upload = SimpleUploadedFile("program.json", raw, content_type="application/json")
    started = time.perf_counter()
    response = client.post(reverse("training:program-import"), {"file": upload})
    return response, time.perf_counter() - started


def input_schema(document: dict) -> dict:
    return document["graph"]["inputs"][0]["data_model"]


def language_model_config(document: dict) -> dict:
    return document["graph"]["modules"][0]["config"]["language_model"]["config"]


def test_a_20000_field_schema_is_refused_before_building_it(client_user, program):
    document = copy.deepcopy(program.engine_json)
    schema = input_schema(document)
    schema["properties"] = {f"f{i}": {"type": "string"} for i in range(20_000)}
    schema["required"] = list(schema["properties"])
    response, elapsed = post_import(client_user, json.dumps(document).encode())
    print(f"20,000-field schema refused in {elapsed:.2f} s")
    assert response.status_code == 400
    assert f"has 20,000 fields; at most {MAX_FIELDS} are allowed" in response.content.decode()
    assert not Program.objects.filter(source=Program.SOURCE_IMPORT).exists()


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_nesting_100000_deep_is_a_clear_400(client_user, opening):
    closing = "]" if opening == "[" else "}"
    raw = (opening * 100_000 + "1" + closing * 100_000).encode()
    response, elapsed = post_import(client_user, raw)
    print(f"100,000-deep nesting refused in {elapsed * 1000:.0f} ms")
    assert response.status_code == 400
    assert f"nested more than {IMPORT_MAX_NESTING} levels deep (line 1)" in (
        response.content.decode()
    )


def test_nan_given_as_text_for_a_number_is_a_clear_400(client_user, program):
    document = copy.deepcopy(program.engine_json)
    language_model_config(document)["latency"] = "nan"
    response, _ = post_import(client_user, json.dumps(document).encode())
    assert response.status_code == 400
    assert "latency is not a finite number" in response.content.decode()
    assert not Program.objects.filter(source=Program.SOURCE_IMPORT).exists()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_refused(client_user, program, literal):
    raw = json.dumps(program.engine_json).replace('"temperature": 0.0', f'"temperature": {literal}')
    assert literal in raw
    response, _ = post_import(client_user, raw.encode())
    assert response.status_code == 400
    assert f"{literal} is not a number JSON allows" in response.content.decode()


def test_a_lone_surrogate_is_refused(client_user, program):
    document = copy.deepcopy(program.engine_json)
    document["description"] = "bad \ud800 text"
    raw = json.dumps(document).encode()  # ensure_ascii: written as the \ud800 escape
    response, _ = post_import(client_user, raw)
    assert response.status_code == 400
    assert "U+D800, a lone UTF-16 surrogate" in response.content.decode()


def test_an_ordinary_export_still_imports(client_user, program):
    response, _ = post_import(client_user, json.dumps(program.engine_json).encode())
    assert response.status_code == 302
    assert Program.objects.filter(source=Program.SOURCE_IMPORT).count() == 1


@pytest.mark.parametrize(("key", "size"), [("name", 4 * 1024 * 1024), ("description", 6_000)])
def test_a_name_or_description_past_its_bound_is_a_clear_400(client_user, program, key, size):
    document = copy.deepcopy(program.engine_json)
    document[key] = "n" * size
    response, _ = post_import(client_user, json.dumps(document).encode())
    assert response.status_code == 400
    shown = html.unescape(response.content.decode())
    assert f"the program's {key} is {size:,} characters long; at most" in shown
    assert not Program.objects.filter(source=Program.SOURCE_IMPORT).exists()
