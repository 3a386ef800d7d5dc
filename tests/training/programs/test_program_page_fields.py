"""The program page shows what goes in and what comes out: every field of the input and output
data models (role, data model, name, type or label set), and how to load the export in Python.
"""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

import training.engine as synalinks
from training.models import Program

pytestmark = pytest.mark.django_db


def _rows(html: str) -> dict[str, list[str]]:
    """``{field: [role, data model, field, type, description]}`` of the Fields table."""
    table = re.search(r'<table class="table" id="program-fields">(.*?)</table>', html, re.S)
    rows = {}
    for name, body in re.findall(r'<tr data-field="([^"]+)">(.*?)</tr>', table.group(1), re.S):
        cells = re.findall(r"<td>(.*?)</td>", body, re.S)
        rows[name] = [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]
    return rows


def test_the_program_page_lists_input_and_output_fields(client_user, user, tmp_path):
    Ticket = synalinks.create_data_model(
        "Ticket",
        [
            {"name": "text", "type": "str", "description": "The message."},
            {"name": "priority", "type": "int", "description": "1 to 5."},
            {"name": "tags", "type": "list[str]", "description": "Free tags."},
        ],
    )
    Triage = synalinks.create_data_model(
        "Triage",
        [
            {"name": "team", "type": "str", "choices": ["billing", "bug"], "description": "Who."},
            {"name": "confidence", "type": "float", "description": "0 to 1."},
        ],
    )
    lm = synalinks.testing.FakeLanguageModel(model="fake/echo")
    program = synalinks.Sequential(
        [
            synalinks.Input(data_model=Ticket),
            synalinks.Generator(data_model=Triage, language_model=lm),
        ],
        name="triage",
    )
    path = tmp_path / "triage.json"
    program.save(str(path))
    upload = SimpleUploadedFile("triage.json", path.read_bytes(), content_type="application/json")
    client_user.post(reverse("training:program-import"), {"file": upload})
    imported = Program.objects.get(owner=user, name="triage")

    html = client_user.get(imported.get_absolute_url()).content.decode()
    assert _rows(html) == {
        "text": ["input", "Ticket", "text", "str", "The message."],
        "priority": ["input", "Ticket", "priority", "int", "1 to 5."],
        "tags": ["input", "Ticket", "tags", "list[str]", "Free tags."],
        "team": ["output", "Triage", "team", "label set: billing, bug", "Who."],
        "confidence": ["output", "Triage", "confidence", "float", "0 to 1."],
    }
    assert f'synalinks.Program.load("program-{imported.pk}.json")' in html
    # the exported file is that name, and loads into the same data models
    export = client_user.get(reverse("training:program-export", args=[imported.pk]))
    assert f'filename="program-{imported.pk}.json"' in export["Content-Disposition"]
    loaded = synalinks.Program.from_json(export.content.decode())
    assert loaded.input_data_models[0].get_schema() == Ticket.get_schema()
    assert loaded.outputs[0].data_model.get_schema()["properties"]["team"]["enum"] == [
        "billing",
        "bug",
    ]
