"""Bad dataset files are refused at upload with a message naming the problem, never a 500.

A very wide CSV (5,000 columns) is refused before its preview and mapping form are built;
a lone surrogate (``"\\ud800"``) in a JSON file is refused with its place; nesting deeper
than the bound is refused before it is parsed.
"""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from datasets.ingest.columns import MAPPING_INPUTS_PER_COLUMN, MAX_COLUMNS
from datasets.ingest.jsonl_reader import MAX_NESTING
from datasets.models import Dataset, Upload

from .conftest import stored_files

pytestmark = pytest.mark.django_db


def post_file(client, name: str, payload: bytes, **extra):
    return client.post("/datasets/upload/", {"file": SimpleUploadedFile(name, payload), **extra})


def wide_csv(columns: int, rows: int = 3) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    body = "\n".join(",".join(str(r * i) for i in range(columns)) for r in range(rows))
    return f"{header}\n{body}\n".encode()


def test_a_5000_column_csv_is_refused_at_upload_naming_the_limit(alice_client, media_root):
    payload = wide_csv(5000)
    started = time.perf_counter()
    response = post_file(alice_client, "wide.csv", payload)
    elapsed = time.perf_counter() - started
    print(f"wide CSV (5,000 columns, {len(payload):,} bytes) refused in {elapsed * 1000:.0f} ms")
    assert response.status_code == 400
    text = response.content.decode()
    assert "Line 1: the header has 5,000 columns" in text
    assert f"at most {MAX_COLUMNS} columns" in text
    assert Upload.objects.count() == 0 and stored_files(media_root) == []


def test_the_upload_page_states_the_column_limit(alice_client):
    page = alice_client.get("/datasets/upload/").content.decode()
    assert f"{MAX_COLUMNS} columns" in page


def test_a_file_at_the_column_limit_can_be_mapped_and_saved(alice_client):
    """The widest accepted file's mapping form fits Django's field-count limit."""
    response = post_file(alice_client, "wide.csv", wide_csv(MAX_COLUMNS, rows=10))
    assert response.status_code == 302, response.content[:500]
    upload = Upload.objects.get()
    form = {"name": "wide", "test_ratio": "0.2", "seed": "42", "description": ""}
    for index in range(MAX_COLUMNS):
        role = "input" if index else "target"
        form.update(
            {
                f"col-{index}-column": f"c{index}",
                f"col-{index}-role": role,
                f"col-{index}-name": f"c{index}",
                f"col-{index}-type": "str",
                f"col-{index}-description": "",
            }
        )
    assert len(form) >= MAX_COLUMNS * MAPPING_INPUTS_PER_COLUMN
    preview = alice_client.post(f"/datasets/uploads/{upload.pk}/mapping-preview/", form)
    assert preview.status_code == 200
    created = alice_client.post(f"/datasets/uploads/{upload.pk}/create/", form)
    assert created.status_code == 302, created.content[:500]
    assert Dataset.objects.get().row_count == 10


def test_json_objects_with_too_many_keys_are_refused(alice_client):
    wide = "{" + ",".join(f'"k{i}": {i}' for i in range(MAX_COLUMNS + 1)) + "}"
    response = post_file(alice_client, "wide.jsonl", f'{{"a": 1}}\n{wide}\n'.encode())
    assert response.status_code == 400
    assert f"Line 2: the file (all rows together) has {MAX_COLUMNS + 1} columns" in (
        response.content.decode()
    )


@pytest.mark.parametrize(
    "name,payload,line",
    [
        ("bad.jsonl", b'{"q": "fine", "a": "ok"}\n{"q": "x\\ud800y", "a": "ok"}\n', 2),
        ("bad.jsonl", b'{"q": "fine", "a": "ok"}\n\n{"q": ["x"], "\\udc00": "ok"}\n', 3),
        ("bad.json", b'[\n {"q": "fine", "a": "ok"},\n {"q": "\\uDFFF", "a": "ok"}\n]', 3),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_line(alice_client, media_root, name, payload, line):
    response = post_file(alice_client, name, payload)
    assert response.status_code == 400
    text = response.content.decode()
    assert f"Line {line}:" in text and "lone UTF-16 surrogate" in text
    assert Upload.objects.count() == 0 and stored_files(media_root) == []


def test_a_surrogate_pair_is_an_ordinary_character(alice_client):
    payload = b'{"q": "smile \\ud83d\\ude00", "a": "ok"}\n'
    response = post_file(alice_client, "ok.jsonl", payload)
    assert response.status_code == 302
    assert Upload.objects.get().profile["preview"][0][0] == "smile \U0001f600"


def test_a_surrogate_in_a_csv_list_cell_is_refused_when_mapping(alice_client):
    response = post_file(alice_client, "list.csv", b'q,tags\nhello,"[""\\ud800""]"\n')
    assert response.status_code == 302
    upload = Upload.objects.get()
    form = {
        "name": "tags", "test_ratio": "0.2", "seed": "42",
        "col-0-column": "q", "col-0-role": "input", "col-0-name": "q", "col-0-type": "str",
        "col-1-column": "tags", "col-1-role": "target", "col-1-name": "tags",
        "col-1-type": "list[str]",
    }  # fmt: skip
    response = alice_client.post(f"/datasets/uploads/{upload.pk}/create/", form)
    assert response.status_code == 400
    assert "Line 2" in response.content.decode() and "U+D800" in response.content.decode()
    assert Dataset.objects.count() == 0


@pytest.mark.parametrize("name", ["deep.jsonl", "deep.json"])
def test_nesting_100000_deep_is_a_clear_400(alice_client, name):
    value = "[" * 100_000 + "]" * 100_000
    payload = ('{"q": ' + value + "}").encode()
    if name.endswith(".json"):
        payload = b"[" + payload + b"]"
    response = post_file(alice_client, name, payload)
    assert response.status_code == 400
    assert f"nested more than {MAX_NESTING} levels deep" in response.content.decode()


def test_nesting_within_the_limit_is_read(alice_client):
    value = "[" * (MAX_NESTING - 1) + "1" + "]" * (MAX_NESTING - 1)
    response = post_file(alice_client, "ok.jsonl", ('{"q": ' + value + ', "a": "x"}\n').encode())
    assert response.status_code == 302


@pytest.mark.parametrize(
    "name,payload,encoding",
    [
        ("bad.csv", b"q,a\nfine,ok\nx\xed\xa0\x80y,ok\n", "utf-8"),  # U+D800 encoded as UTF-8
        ("bad.tsv", "q\ta\nfine\tok\n".encode("utf-16") + b"\x00\xd8\x0a\x00", "utf-16"),
    ],
)
def test_surrogate_bytes_in_csv_and_tsv_are_refused_naming_the_line(
    alice_client, name, payload, encoding
):
    """Delimited files hold no JSON escapes: the strict decoder refuses surrogate bytes."""
    response = post_file(alice_client, name, payload, encoding=encoding)
    assert response.status_code == 400
    assert "line 3" in response.content.decode()
    assert Upload.objects.count() == 0
