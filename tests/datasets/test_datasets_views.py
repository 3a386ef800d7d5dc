"""Upload → preview → mapping → create → detail / download / delete, through the test client."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from datasets import services
from datasets.ingest.splitting import split_mask
from datasets.models import Dataset, DatasetRow, Upload
from datasets.views import datasets as views
from training.models import Program, Run

from .conftest import FIXTURES, stored_files

pytestmark = pytest.mark.django_db


def fixture_file(name, content_type="application/octet-stream"):
    return SimpleUploadedFile(name, (FIXTURES / name).read_bytes(), content_type=content_type)


def upload(client, name, **extra):
    data = {"file": fixture_file(name), "format": "", "encoding": "utf-8", **extra}
    return client.post("/datasets/upload/", data)


def mapping_post(upload_obj, roles, name="My dataset", **extra):
    """POST data for the mapping form: roles is {column: (role, field_name, type)}."""
    data = {"name": name, "description": "", "test_ratio": "0.25", "seed": "7", **extra}
    for index, column in enumerate(upload_obj.columns):
        role, field_name, field_type = roles.get(column, ("ignore", column, "str"))
        data.update(
            {
                f"col-{index}-column": column,
                f"col-{index}-role": role,
                f"col-{index}-name": field_name,
                f"col-{index}-type": field_type,
                f"col-{index}-description": f"about {column}",
            }
        )
    return data


def create_from(client, fixture, roles, **extra):
    response = upload(client, fixture)
    assert response.status_code == 302, response.content
    pending = Upload.objects.get()
    return client.post(
        f"/datasets/uploads/{pending.pk}/create/", mapping_post(pending, roles, **extra)
    )


QA_ROLES = {"question": ("input", "question", "str"), "answer": ("target", "answer", "str")}


# --- login -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/datasets/", "/datasets/upload/", "/datasets/1/", "/datasets/1/download/"]
)
def test_login_required(client, url):
    response = client.get(url)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# --- upload and preview -----------------------------------------------------------------


def test_upload_page_shows_limit(alice_client, settings):
    settings.TRAINBOARD_UPLOAD_MAX_BYTES = 5 * 1024 * 1024
    html = alice_client.get("/datasets/upload/").content.decode()
    assert 'data-max-bytes="5242880"' in html and "up to 5 MB" in html
    assert "upload.js" in html


def test_upload_csv_then_preview(alice_client, alice, media_root):
    response = upload(alice_client, "good.csv")
    pending = Upload.objects.get()
    assert response["Location"] == f"/datasets/uploads/{pending.pk}/"
    assert pending.owner == alice and pending.format == "csv"
    assert pending.profile["row_count"] == 5 and pending.profile["duplicate_rows"] == 1
    [stored] = stored_files(media_root)
    assert stored.read_bytes() == (FIXTURES / "good.csv").read_bytes()  # original kept as is

    html = alice_client.get(response["Location"]).content.decode()
    assert 'id="row-count">5<' in html and 'id="duplicate-count">1<' in html
    for text in ("question", "answer", "difficulty", "Capital of France?", "int"):
        assert text in html
    # The mapping form is pre-filled: "answer" looks like a target.
    assert 'name="col-1-role"' in html


def test_upload_json_accept_gets_json(alice_client):
    response = alice_client.post(
        "/datasets/upload/",
        {"file": fixture_file("good.jsonl"), "encoding": "utf-8"},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 200
    assert response.json()["redirect"].startswith("/datasets/uploads/")


def test_upload_with_explicit_format_and_encoding(alice_client):
    response = alice_client.post(
        "/datasets/upload/",
        {
            "file": SimpleUploadedFile("data.txt", (FIXTURES / "bad_encoding.csv").read_bytes()),
            "format": "csv",
            "encoding": "latin-1",
        },
    )
    assert response.status_code == 302
    assert "café au lait" in Upload.objects.get().profile["preview"][1]


@pytest.mark.parametrize(
    "name, message",
    [
        ("bad_encoding.csv", "byte 0xe9 at line 3, byte offset 27"),
        ("malformed.jsonl", "Malformed JSON on line 3"),
        ("malformed_array.json", "Malformed JSON on line 3"),
        ("ragged.csv", "CSV line 4 has 3 values but the header (line 1) has 2 columns"),
        ("no_rows.csv", "no rows"),
        ("no_rows.jsonl", "no rows"),
        ("duplicate_columns.csv", "Duplicate column name 'question'"),
        ("duplicate_keys.jsonl", "Duplicate column name 'answer'"),
        ("not_array.json", "array of objects"),
    ],
)
def test_bad_upload_clear_error_nothing_saved(alice_client, media_root, name, message):
    response = upload(alice_client, name)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not Upload.objects.exists()
    assert stored_files(media_root) == []

    response = alice_client.post(
        "/datasets/upload/",
        {"file": fixture_file(name), "encoding": "utf-8"},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 400 and message in response.json()["error"]


def test_unknown_extension_is_refused(alice_client):
    response = alice_client.post(
        "/datasets/upload/", {"file": SimpleUploadedFile("data.xlsx", b"a,b\n1,2\n")}
    )
    assert response.status_code == 400 and "Cannot tell the format" in response.content.decode()


def test_file_over_limit_refused(alice_client, settings, media_root):
    settings.TRAINBOARD_UPLOAD_MAX_BYTES = 1024
    response = upload(alice_client, "over_limit.csv", encoding="utf-8")
    assert response.status_code == 413
    assert "larger than the upload limit" in response.content.decode()
    assert not Upload.objects.exists() and stored_files(media_root) == []


class CountingStream(io.BytesIO):
    """wsgi.input that records how many bytes the server side actually read."""

    def __init__(self, data):
        super().__init__(data)
        self.consumed = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.consumed += len(chunk)
        return chunk

    def readline(self, size=-1):
        line = super().readline(size)
        self.consumed += len(line)
        return line


def raw_upload_request(alice, payload: bytes, filename="big.csv"):
    """A POST whose body is read through CountingStream, as a WSGI server would feed it."""
    from django.core.handlers.wsgi import LimitedStream
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    body = encode_multipart(
        BOUNDARY, {"file": SimpleUploadedFile(filename, payload), "encoding": "utf-8"}
    )
    request = RequestFactory().generic(
        "POST", "/datasets/upload/", data=body, content_type=MULTIPART_CONTENT
    )
    stream = CountingStream(body)
    request._stream = LimitedStream(stream, len(body))
    request.user = alice
    return request, stream, body


def test_over_limit_refused_from_content_length_without_reading_body(alice, settings, media_root):
    settings.TRAINBOARD_UPLOAD_MAX_BYTES = 100 * 1024
    payload = b"a,b\n" + b"1,2\n" * (1024 * 1024 // 4)  # 1 MB
    request, stream, body = raw_upload_request(alice, payload)
    response = views.upload(request)
    assert response.status_code == 413
    assert stream.consumed == 0  # decided from Content-Length alone


def test_over_limit_refused_while_streaming(alice, settings, media_root, monkeypatch):
    """A body whose Content-Length passes is still cut off at the first chunk over the limit."""
    monkeypatch.setattr("datasets.upload_handler.MULTIPART_SLACK", 10**9)
    settings.TRAINBOARD_UPLOAD_MAX_BYTES = 100 * 1024
    payload = b"a,b\n" + b"1,2\n" * (4 * 1024 * 1024 // 4)  # 4 MB
    request, stream, body = raw_upload_request(alice, payload)
    response = views.upload(request)
    assert response.status_code == 413
    assert stream.consumed < 512 * 1024 < len(body)  # stopped long before the end
    assert not Upload.objects.exists() and stored_files(media_root) == []


# --- mapping and creation ---------------------------------------------------------------


def test_mapping_preview_partial(alice_client):
    upload(alice_client, "good.csv")
    pending = Upload.objects.get()
    roles = {**QA_ROLES, "difficulty": ("target", "level", "int")}
    response = alice_client.post(
        f"/datasets/uploads/{pending.pk}/mapping-preview/",
        mapping_post(pending, roles),
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'id="mapped-rows"' in html and "level" in html and "target · int" in html

    roles["answer"] = ("target", "answer", "int")
    response = alice_client.post(
        f"/datasets/uploads/{pending.pk}/mapping-preview/", mapping_post(pending, roles)
    )
    assert "value &#x27;Paris&#x27; cannot be field &#x27;answer&#x27;" in response.content.decode()


def test_create_dataset_full_flow(alice_client, alice, media_root):
    roles = {**QA_ROLES, "difficulty": ("input", "level", "int")}
    response = create_from(alice_client, "good.csv", roles, name="Quiz")
    dataset = Dataset.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/datasets/{dataset.pk}/"
    assert dataset.owner == alice and dataset.name == "Quiz" and dataset.source == "upload"
    assert dataset.input_fields == [
        {"name": "question", "type": "str", "description": "about question"},
        {"name": "level", "type": "int", "description": "about difficulty"},
    ]
    assert dataset.target_schema_fields() == [
        {"name": "answer", "type": "str", "description": "about answer"}
    ]
    assert dataset.column_map == {"question": "question", "level": "difficulty", "answer": "answer"}
    assert (dataset.row_count, dataset.test_ratio, dataset.seed) == (5, 0.25, 7)
    assert (dataset.train_count, dataset.test_count) == (4, 1)
    assert not Upload.objects.exists()
    # The original file is kept, now owned by the dataset.
    assert dataset.original_file.read() == (FIXTURES / "good.csv").read_bytes()
    assert len(stored_files(media_root)) == 1

    first = DatasetRow.objects.get(dataset=dataset, index=0)
    assert first.data == {"question": "What is 2+2?", "level": 1, "answer": "4"}

    html = alice_client.get(response["Location"]).content.decode()
    assert "Quiz" in html and 'id="detail-row-count">5<' in html
    assert "4 train / 1 test" in html and "Multi\nline question" in html


def test_split_is_the_seeded_one_and_get_split(alice_client):
    create_from(alice_client, "good.csv", QA_ROLES)
    dataset = Dataset.objects.get()
    mask = split_mask(5, 0.25, 7)
    stored = list(dataset.rows.order_by("index").values_list("split", flat=True))
    assert stored == ["test" if flag else "train" for flag in mask]

    x_train, y_train = services.get_split(dataset, "train")
    x_test, y_test = services.get_split(dataset, "test")
    assert len(x_train) == 4 and len(x_test) == 1
    assert all(set(x) == {"question"} for x in x_train + x_test)
    assert all(set(y) == {"answer"} for y in y_train + y_test)
    questions = [x["question"] for x in x_train + x_test]
    assert sorted(questions) == sorted(
        [
            "What is 2+2?",
            "Capital of France?",
            "A quote, with comma",
            "Multi\nline question",
            "What is 2+2?",
        ]
    )
    with pytest.raises(ValueError):
        services.get_split(dataset, "validation")


def test_create_with_mapped_column_that_does_not_exist(alice_client):
    upload(alice_client, "good.csv")
    pending = Upload.objects.get()
    data = {"name": "x", "test_ratio": "0.2", "seed": "1"}
    entries = json.loads((FIXTURES / "mapping_missing_column.json").read_text())
    for index, entry in enumerate(entries):
        data.update({f"col-{index}-{key}": value for key, value in entry.items()})
    response = alice_client.post(f"/datasets/uploads/{pending.pk}/create/", data)
    assert response.status_code == 400
    assert "The mapped column &#x27;answr&#x27; does not exist" in response.content.decode()
    assert not Dataset.all_objects.exists() and not DatasetRow.objects.exists()
    assert Upload.objects.exists()  # the user can fix the mapping and try again


def test_create_with_bad_value_saves_nothing(alice_client):
    response = create_from(
        alice_client, "good.csv", {**QA_ROLES, "answer": ("target", "answer", "float")}
    )
    assert response.status_code == 400
    assert "Line 3: column &#x27;answer&#x27; value &#x27;Paris&#x27;" in response.content.decode()
    assert not Dataset.all_objects.exists() and not DatasetRow.objects.exists()


def test_create_skip_incomplete(alice_client):
    roles = {"question": ("input", "question", "str"), "score": ("target", "score", "float")}
    response = create_from(alice_client, "good.jsonl", roles, skip_incomplete="on")
    assert response.status_code == 302
    dataset = Dataset.objects.get()
    assert dataset.row_count == 2 and dataset.skipped_rows == 1


def test_create_needs_input_and_target(alice_client):
    response = create_from(alice_client, "good.csv", {"question": ("input", "question", "str")})
    assert response.status_code == 400
    assert "Map at least one column to a target field" in response.content.decode()


def test_discard_upload(alice_client, media_root):
    upload(alice_client, "good.csv")
    pending = Upload.objects.get()
    response = alice_client.post(f"/datasets/uploads/{pending.pk}/discard/")
    assert response.status_code == 302
    assert not Upload.objects.exists() and stored_files(media_root) == []


# --- detail, download, delete -------------------------------------------------------------


def test_rows_partial_pages_and_splits(alice_client, alice):
    dataset = services.import_builtin(alice, "gsm8k")
    assert dataset.test_count == 60
    html = alice_client.get(
        f"/datasets/{dataset.pk}/rows/?split=test&page=3", headers={"HX-Request": "true"}
    ).content.decode()
    assert "<html" not in html and "page 3 of 3" in html
    assert html.count("<tr>") == 1 + 20  # header + the last 20 test rows
    assert html.count("<td>test</td>") == 20 and "<td>train</td>" not in html


def test_download_jsonl_streams_rows(alice_client):
    create_from(alice_client, "good.csv", QA_ROLES, name="Quiz Set")
    dataset = Dataset.objects.get()
    response = alice_client.get(f"/datasets/{dataset.pk}/download/")
    assert response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="quiz-set.jsonl"'
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert [json.loads(line) for line in lines][3] == {
        "question": "Multi\nline question",
        "answer": "42",
    }
    test_only = alice_client.get(f"/datasets/{dataset.pk}/download/?split=test")
    assert len(b"".join(test_only.streaming_content).splitlines()) == 1
    assert alice_client.get(f"/datasets/{dataset.pk}/download/?split=x").status_code == 404


def test_download_original(alice_client):
    create_from(alice_client, "good.csv", QA_ROLES)
    dataset = Dataset.objects.get()
    response = alice_client.get(f"/datasets/{dataset.pk}/original/")
    assert b"".join(response.streaming_content) == (FIXTURES / "good.csv").read_bytes()
    assert "good.csv" in response["Content-Disposition"]


def test_delete_dataset_removes_rows_and_file(
    alice_client, media_root, django_capture_on_commit_callbacks
):
    create_from(alice_client, "good.csv", QA_ROLES)
    dataset = Dataset.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/datasets/{dataset.pk}/delete/", follow=True)
    assert "Deleted" in response.content.decode()
    assert not Dataset.objects.exists() and not DatasetRow.objects.exists()
    assert stored_files(media_root) == []


class FakeRuns:
    """Stands in for the queryset of runs using a dataset: several runs, listed newest first."""

    def __init__(self, pks):
        self.pks = pks

    def exists(self):
        return bool(self.pks)

    def count(self):
        return len(self.pks)

    def order_by(self, *args):
        return [type("Run", (), {"pk": pk})() for pk in sorted(self.pks, reverse=True)]


def test_delete_refused_while_a_run_uses_it(alice_client, monkeypatch):
    create_from(alice_client, "good.csv", QA_ROLES, name="Busy")
    dataset = Dataset.objects.get()
    monkeypatch.setattr(services, "runs_using", lambda d: FakeRuns([3, 9]))
    response = alice_client.post(f"/datasets/{dataset.pk}/delete/", follow=True)
    html = response.content.decode()
    assert "cannot be deleted: 2 runs use it (#9, #3). Delete those runs first." in html
    assert Dataset.objects.filter(pk=dataset.pk).exists() and dataset.rows.count() == 5


def test_runs_using_a_new_dataset_finds_none(alice):
    dataset = services.create_demo_dataset(alice)
    assert services.runs_using(dataset).count() == 0


def test_delete_refused_with_a_real_run(alice_client, alice):
    """A run on the dataset blocks deleting it, clearly."""
    dataset = services.create_demo_dataset(alice)
    program = Program.objects.create(
        owner=alice, name="p", model="local/smollm2", engine_json={}, dataset=dataset
    )
    run = Run.objects.create(
        owner=alice, program=program, dataset=dataset, config={}, status="running"
    )
    response = alice_client.post(f"/datasets/{dataset.pk}/delete/", follow=True)
    assert f"1 run uses it (#{run.pk} running). Delete those runs first." in (
        response.content.decode()
    )
    assert Dataset.objects.filter(pk=dataset.pk).exists()


# --- ownership ----------------------------------------------------------------------------


def test_other_user_gets_404_everywhere(alice_client, bob_client):
    create_from(alice_client, "good.csv", QA_ROLES)
    dataset = Dataset.objects.get()
    upload(alice_client, "good.tsv")
    pending = Upload.objects.get()
    for url in [
        f"/datasets/{dataset.pk}/",
        f"/datasets/{dataset.pk}/rows/",
        f"/datasets/{dataset.pk}/download/",
        f"/datasets/{dataset.pk}/original/",
        f"/datasets/uploads/{pending.pk}/",
    ]:
        assert bob_client.get(url).status_code == 404, url
    for url in [
        f"/datasets/{dataset.pk}/delete/",
        f"/datasets/uploads/{pending.pk}/mapping-preview/",
        f"/datasets/uploads/{pending.pk}/create/",
        f"/datasets/uploads/{pending.pk}/discard/",
    ]:
        assert bob_client.post(url, {}).status_code == 404, url
    assert Dataset.objects.filter(pk=dataset.pk).exists() and Upload.objects.exists()
    assert "good.csv" not in bob_client.get("/datasets/").content.decode()


# --- escaping -----------------------------------------------------------------------------


def test_dataset_text_is_escaped(alice_client):
    response = upload(alice_client, "good.jsonl")
    html = alice_client.get(response["Location"]).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    roles = {"question": ("input", "question", "str"), "answer": ("target", "answer", "str")}
    pending = Upload.objects.get()
    response = alice_client.post(
        f"/datasets/uploads/{pending.pk}/create/", mapping_post(pending, roles, name="<b>x</b>")
    )
    html = alice_client.get(response["Location"]).content.decode()
    assert "<script>alert(1)</script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- built-ins ----------------------------------------------------------------------------


def test_list_shows_builtins_and_import_is_one_click(alice_client, alice):
    html = alice_client.get("/datasets/").content.decode()
    for key in ("demo", "gsm8k", "tweeteval_sentiment"):
        assert f'id="builtin-{key}"' in html
    response = alice_client.post("/datasets/builtin/tweeteval_sentiment/import/")
    dataset = Dataset.objects.get(builtin_key="tweeteval_sentiment")
    assert response["Location"] == f"/datasets/{dataset.pk}/"
    assert dataset.row_count == 300 and dataset.source == "builtin"
    _, targets = services.get_split(dataset, "train")
    assert {t["label"] for t in targets} == {"negative", "neutral", "positive"}
    assert alice_client.post("/datasets/builtin/nope/import/").status_code == 404
    html = alice_client.get("/datasets/").content.decode()
    assert "TweetEval sentiment sample" in html.split('id="dataset-list"')[1]


def test_import_builtin_gsm8k(alice):
    dataset = services.import_builtin(alice, "gsm8k")
    assert dataset.row_count == 300 and (dataset.train_count, dataset.test_count) == (240, 60)
    assert [f["name"] for f in dataset.target_schema_fields()] == ["thinking", "answer"]
    x, y = services.get_split(dataset, "train")
    assert isinstance(y[0]["answer"], float) and "####" not in y[0]["thinking"]
    assert "<<" not in "".join(t["thinking"] for t in y)
    # The guide's first GSM8K problem falls in the (seeded, so fixed) test split: its target
    # is the worked answer without the calculator annotations and the number as a float.
    x_test, y_test = services.get_split(dataset, "test")
    natalia = [
        t for q, t in zip(x_test, y_test, strict=True) if q["question"].startswith("Natalia")
    ]
    assert natalia == [
        {
            "thinking": "Natalia sold 48/2 = 24 clips in May.\n"
            "Natalia sold 48+24 = 72 clips altogether in April and May.",
            "answer": 72.0,
        }
    ]
    assert not any(q["question"].startswith("Natalia") for q in x)
    assert dataset.original_file.read() == (services.BUILTINS["gsm8k"].path).read_bytes()


def test_create_demo_dataset_is_idempotent(alice, bob):
    first = services.create_demo_dataset(alice)
    again = services.create_demo_dataset(alice)
    assert first.pk == again.pk and Dataset.objects.filter(owner=alice).count() == 1
    assert first.row_count == 48 and first.test_count == 12
    x_train, y_train = services.get_split(first, "train")
    assert set(x_train[0]) == {"message"}
    assert {y["team"] for y in y_train} == {"money", "bug", "box"}
    assert services.create_demo_dataset(bob).pk != first.pk


def test_unknown_builtin(alice):
    with pytest.raises(services.DatasetError, match="no built-in dataset"):
        services.import_builtin(alice, "nope")


def test_create_demo_dataset_command(alice, bob):
    from django.core.management import call_command

    out = io.StringIO()
    call_command("create_demo_dataset", stdout=out)
    assert Dataset.objects.get(builtin_key="demo").owner == alice  # the first user
    call_command("create_demo_dataset", "bob", stdout=out)
    call_command("create_demo_dataset", "bob", stdout=out)
    assert Dataset.objects.filter(builtin_key="demo", owner=bob).count() == 1


def test_tweeteval_sample_reads_as_text_not_escapes(alice):
    """The raw TweetEval files keep literal \\u2019 escapes and &amp; entities; ours don't."""
    dataset = services.import_builtin(alice, "tweeteval_sentiment")
    inputs, _ = services.get_split(dataset, "train")
    test_inputs, _ = services.get_split(dataset, "test")
    texts = [row["text"] for row in inputs + test_inputs]
    assert len(texts) == 300
    assert not [t for t in texts if "\\u" in t or "&amp;" in t or "&gt;" in t]
    assert any("\u2019" in t for t in texts)  # the right single quote, as a character


def test_split_settings_form_and_service_share_one_rule():
    """The settings form's HTML min/max and the service's check are splitting.py's limits."""
    from datasets.forms import DatasetSettingsForm
    from datasets.ingest import splitting
    from datasets.ingest.errors import DatasetError

    html = str(DatasetSettingsForm()["test_ratio"])
    assert f'min="{splitting.TEST_RATIO_MIN}"' in html
    assert f'max="{splitting.TEST_RATIO_MAX}"' in html
    assert f'max="{splitting.SEED_MAX}"' in str(DatasetSettingsForm()["seed"])
    for ratio in (splitting.TEST_RATIO_MIN, splitting.TEST_RATIO_MAX):
        splitting.check_split_settings(ratio, 0)
        form = DatasetSettingsForm({"name": "x", "test_ratio": str(ratio), "seed": "1"})
        assert form.is_valid(), form.errors
    for ratio in (0.005, 0.95):
        with pytest.raises(DatasetError, match="test ratio must be between 0.01 and 0.9"):
            splitting.check_split_settings(ratio, 0)
        form = DatasetSettingsForm({"name": "x", "test_ratio": str(ratio), "seed": "1"})
        assert not form.is_valid() and list(form.errors) == ["test_ratio"]
    with pytest.raises(DatasetError, match="seed"):
        splitting.check_split_settings(0.2, splitting.SEED_MAX + 1)
