"""Pages with the Django test client: programs (create, import, export), launch form
validation, run page rendered from the DB (and only read: reaping is the reaper's), runs
list filters, compare, downloads, candidates, home."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

import training.engine as synalinks
from datasets.services import create_demo_dataset
from training.models import Candidate, EpochLog, Evaluation, Program, Run

from .conftest import make_program, make_run, save_checkpoint, stale_running_run

pytestmark = pytest.mark.django_db


def test_create_program_in_the_form_stores_engine_json_that_loads(
    client_user, user, demo_dataset, tmp_path
):
    response = client_user.post(
        reverse("training:program-create"),
        {
            "name": "Support router",
            "dataset": demo_dataset.pk,
            "module": "ChainOfThought",
            "instructions": "Pick the team.",
            "model": "fake/fewshot",
            "temperature": "0",
        },
    )
    program = Program.objects.get(owner=user, name="Support router")
    assert response.status_code == 302 and response["Location"] == program.get_absolute_url()
    exported = client_user.get(reverse("training:program-export", args=[program.pk]))
    path = tmp_path / "exported.json"
    path.write_bytes(exported.content)
    loaded = synalinks.Program.load(str(path))
    assert isinstance(loaded.modules[0], synalinks.ChainOfThought)
    assert loaded.get_variables()["chain_of_thought/state"]["instructions"] == "Pick the team."
    assert list(loaded.inputs[0].data_model.model_fields) == ["message"]


def test_program_form_rejects_a_bad_model_string(client_user, demo_dataset):
    response = client_user.post(
        reverse("training:program-create"),
        {
            "name": "x",
            "dataset": demo_dataset.pk,
            "module": "Generator",
            "model": "fake/nonsense",
            "temperature": "0",
        },
    )
    assert response.status_code == 200
    assert "unknown fake model" in response.content.decode()
    assert not Program.objects.filter(name="x").exists()


def test_import_a_program_saved_in_code(client_user, user, demo_dataset, tmp_path):
    lm = synalinks.testing.FakeLanguageModel(model="fake/echo")
    Query = synalinks.create_data_model(
        "Query", [{"name": "message", "type": "str", "description": "m"}]
    )
    Answer = synalinks.create_data_model(
        "Answer", [{"name": "team", "type": "str", "description": "t"}]
    )
    program = synalinks.Sequential(
        [
            synalinks.Input(data_model=Query),
            synalinks.Generator(data_model=Answer, language_model=lm, instructions="Be brief."),
        ],
        name="from_code",
    )
    path = tmp_path / "saved.json"
    program.save(str(path))
    upload = SimpleUploadedFile("saved.json", path.read_bytes(), content_type="application/json")
    response = client_user.post(
        reverse("training:program-import"), {"file": upload, "dataset": demo_dataset.pk}
    )
    imported = Program.objects.get(owner=user, source=Program.SOURCE_IMPORT)
    assert response.status_code == 302
    assert (
        imported.name == "from_code"
        and imported.instructions == "Be brief."
        and imported.model == "fake/echo"
    )
    assert imported.engine_json["graph"] == program.get_config()["graph"]


def test_import_rejects_garbage_with_a_reason(client_user):
    upload = SimpleUploadedFile("bad.json", b'{"format": "nope"}', content_type="application/json")
    response = client_user.post(reverse("training:program-import"), {"file": upload})
    assert response.status_code == 400
    assert "not a program saved by program.save()" in response.content.decode()
    upload = SimpleUploadedFile("bad.json", b"{not json", content_type="application/json")
    response = client_user.post(reverse("training:program-import"), {"file": upload})
    assert "line 1, column 2" in response.content.decode()


def test_a_new_program_opens_with_a_name(client_user, user, demo_dataset):
    page = client_user.get(reverse("training:program-create")).content.decode()
    assert 'name="name" value="Program 1"' in page
    make_program(user, demo_dataset, name="Program 2")
    page = client_user.get(reverse("training:program-create")).content.decode()
    assert 'name="name" value="Program 3"' in page  # the next free one


def test_the_home_pages_import_link_leads_to_the_import_form(client_user, user, demo_dataset):
    make_program(user, demo_dataset)  # the link is under the user's programs
    home = client_user.get(reverse("training:home")).content.decode()
    link = re.search(r'<a href="([^"]+)">Import a program JSON</a>', home).group(1)
    page = client_user.get(link.split("#")[0])
    assert page.status_code == 200 and 'id="import-form"' in page.content.decode()
    assert link.endswith("#import-form")
    # the old address, from a bookmark, leads there too instead of a bare 405
    old = client_user.get(reverse("training:program-import"))
    assert old.status_code == 302 and old["Location"].endswith("/programs/#import-form")


def launch_data(program, dataset, **overrides):
    data = {
        "program": program.pk,
        "dataset": dataset.pk,
        "reward": "ExactMatch",
        "optimizer": "RandomFewShot",
        "rfs_nb_min_examples": "1",
        "rfs_nb_max_examples": "3",
        "rfs_nb_candidates": "1",
        "epochs": "2",
        "batch_size": "8",
        "validation_split": "0.2",
        "shuffle": "on",
        "seed": "",
        "evaluations_before": "1",
        "evaluations_after": "1",
        "omega_algorithm": "dns",
        "omega_selection": "softmax",
    }
    data.update(overrides)
    return data


def test_launch_creates_a_queued_run_and_enqueues_it(
    client_user, user, program, demo_dataset, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(
        "training.execution.tasks.execute_run.apply_async",
        lambda args, **options: sent.append(args) or type("R", (), {"id": "t1"})(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client_user.post(
            reverse("training:run-create"), launch_data(program, demo_dataset, metrics=["F1Score"])
        )
    run = Run.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.status == Run.QUEUED and sent == [[run.pk, 1]]
    assert run.config["optimizer"] == {
        "name": "RandomFewShot",
        "params": {
            "few_shot_learning": True,  # what RandomFewShot does (the box is fixed)
            "nb_min_examples": 1,
            "nb_max_examples": 3,
            "nb_candidates": 1,
        },
    }
    assert run.config["reward"]["in_mask"] == ["team"] and isinstance(run.config["seed"], int)
    assert run.config["metrics"] == [{"name": "F1Score", "in_mask": ["team"]}]


@pytest.mark.parametrize(
    ("overrides", "field", "text"),
    [
        ({"epochs": "0"}, "epochs", "must be a whole number between 1 and 1000, got 0"),
        ({"validation_split": "1.5"}, "validation_split", "must be a number between 0 and 0.95"),
        (
            {"rfs_nb_min_examples": "4", "rfs_nb_max_examples": "2"},
            "rfs_nb_max_examples",
            "must be at least nb_min_examples (4)",
        ),
        (
            {"optimizer": "OMEGA", "omega_mutation_temperature": "0"},
            "omega_mutation_temperature",
            "must be a number of at least 0.01, got 0",
        ),
        (
            {"optimizer": "OMEGA", "omega_merging_rate": "2"},
            "omega_merging_rate",
            "between 0 and 1",
        ),
        (
            {"optimizer": "OMEGA", "omega_population_size": "1"},
            "omega_population_size",
            "must be a whole number between 2 and 10000, got 1",
        ),
        (
            {"optimizer": "OMEGA", "omega_algorithm": "nope"},
            "omega_algorithm",
            "Select a valid choice",
        ),
        ({"reward_in_mask": "answer"}, "reward_in_mask", "unknown field(s) ['answer']"),
        ({"batch_size": "abc"}, "batch_size", "must be a whole number"),
    ],
)
def test_launch_form_reports_each_bad_parameter_on_its_field(
    client_user, program, demo_dataset, overrides, field, text
):
    response = client_user.post(
        reverse("training:run-create"), launch_data(program, demo_dataset, **overrides)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert text in " ".join(errors[field])
    assert not Run.objects.exists()


def test_launch_form_refuses_a_dataset_without_the_programs_fields(client_user, user, demo_dataset):
    from datasets.services import import_builtin

    gsm8k = import_builtin(user, "gsm8k")
    program = make_program(user, demo_dataset)
    response = client_user.post(reverse("training:run-create"), launch_data(program, gsm8k))
    assert "input needs field(s) ['message']" in " ".join(
        response.context["form"].errors["dataset"]
    )


def test_metric_checkboxes_are_not_nested_in_one_label(client_user, program):
    html = client_user.get(reverse("training:run-create")).content.decode()
    start = html.index('id="field-metrics"')
    block = html[start : html.index("</div>", start)]
    assert block.count("<label") == block.count("</label>")
    assert "<label>Metrics</label>" in block  # the group's own label, wrapping no checkbox
    assert (
        '<label for="id_metrics_0"><input type="checkbox" name="metrics" value="F1Score"' in block
    )
    # each checkbox has its own label, none of them wraps the others
    assert block.index("Metrics</label>") < block.index('value="F1Score"')


def make_finished_run(
    user, program, dataset, rewards=(0.2, 0.5), before=(0.1, 0.2), after=(0.6, 0.7), **fields
):
    fields.setdefault("status", Run.SUCCEEDED)
    run = make_run(user, program, dataset, **fields)
    for epoch, reward in enumerate(rewards):
        EpochLog.objects.create(
            run=run, epoch=epoch, logs={"reward": reward, "val_reward": reward - 0.1}
        )
    for index, value in enumerate(before):
        Evaluation.objects.create(run=run, phase="before", index=index, metrics={"reward": value})
    for index, value in enumerate(after):
        Evaluation.objects.create(run=run, phase="after", index=index, metrics={"reward": value})
    save_checkpoint(run, epoch=len(rewards) - 1)
    run.baseline_reward, run.final_reward, run.best_reward = (
        sum(before) / len(before),
        sum(after) / len(after),
        max(rewards),
    )
    run.save()
    return run


def test_run_page_renders_everything_so_far_from_the_db(client_user, user, program, demo_dataset):
    run = make_finished_run(user, program, demo_dataset, status=Run.RUNNING)
    Candidate.objects.create(
        run=run,
        variable="generator/state",
        candidate_id="c1",
        operation="seed",
        value={"instructions": "x", "examples": []},
        reward=0.4,
        status="scored",
    )
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert f'ws-connect="/ws/runs/{run.pk}/"' in html and 'hx-ext="ws"' in html
    assert html.count("<tr data-epoch=") == 2
    assert "0.150 ± 0.071" in html and "0.650 ± 0.071" in html and "+0.500" in html
    assert "c1" in html and "Cancel" in html
    history = json.loads(html.split('data-history="', 1)[1].split('"', 1)[0].replace("&quot;", '"'))
    assert history["series"]["reward"] == [0.2, 0.5]


def test_run_pages_only_read_a_stale_run_is_left_to_the_reaper(
    client_user, user, program, demo_dataset, settings
):
    """GET never writes: a run whose heartbeat is stale stays as stored until the reaper
    (``manage.py reap_runs``, see test_lifecycle/test_reaper_loop) fails it."""
    settings.TRAINBOARD_HEARTBEAT_STALE_SECONDS = 30
    stale = stale_running_run(user, program, demo_dataset)
    for url in (
        reverse("training:run-list"),
        stale.get_absolute_url(),
        reverse("training:run-poll", args=[stale.pk]),
    ):
        assert client_user.get(url).status_code == 200, url
    stale.refresh_from_db()
    assert (stale.status, stale.error, stale.finished_at) == (Run.RUNNING, "", None)


def test_runs_list_filters_and_sorts(client_user, user, program, demo_dataset):
    low = make_finished_run(user, program, demo_dataset, rewards=(0.1,))
    high = make_finished_run(user, program, demo_dataset, rewards=(0.9,))
    failed = make_run(user, program, demo_dataset, status=Run.FAILED, error="boom")
    response = client_user.get(reverse("training:run-list"), {"sort": "-best"})
    assert [run.pk for run in response.context["runs"]][:2] == [high.pk, low.pk]
    response = client_user.get(reverse("training:run-list"), {"sort": "best"})
    assert [run.pk for run in response.context["runs"]][:2] == [low.pk, high.pk]
    response = client_user.get(reverse("training:run-list"), {"status": "failed"})
    assert [run.pk for run in response.context["runs"]] == [failed.pk]
    html = client_user.get(reverse("training:run-list")).content.decode()
    assert "RandomFewShot" in html and "fake/fewshot" in html and "boom" in html


def test_compare_two_runs(client_user, user, program, demo_dataset):
    a = make_finished_run(user, program, demo_dataset)
    b = make_finished_run(user, program, demo_dataset, rewards=(0.3, 0.4, 0.8))
    b.config["epochs"] = 3
    b.save()
    response = client_user.get(reverse("training:compare"), {"runs": [a.pk, b.pk]})
    html = response.content.decode()
    assert 'id="compare-history-chart"' in html and 'id="compare-bars-chart"' in html
    differing = [row["key"] for row in response.context["config_rows"] if row["differs"]]
    assert differing == ["epochs"]
    assert 'class="config-differs"' in html
    data = json.loads(
        html.split('<script id="compare-data" type="application/json">', 1)[1].split(
            "</script>", 1
        )[0]
    )
    assert [len(run["history"]["epochs"]) for run in data["runs"]] == [2, 3]


def test_downloads(client_user, user, program, demo_dataset):
    run = make_finished_run(user, program, demo_dataset)
    run.trained_program_json = program.engine_json
    run.save()
    document = json.loads(
        client_user.get(reverse("training:run-program-json", args=[run.pk])).content
    )
    assert document["format"] == "synalinks-program"
    rows = list(
        csv.reader(
            io.StringIO(
                client_user.get(reverse("training:run-history-csv", args=[run.pk])).content.decode()
            )
        )
    )
    assert rows[0] == ["epoch", "reward", "val_reward"] and rows[1][:2] == ["1", "0.2"]
    for kind in ("history", "evaluation"):
        response = client_user.get(reverse("training:run-plot", args=[run.pk, kind]))
        assert response.status_code == 200 and response["Content-Type"] == "image/png"
        assert b"".join(response.streaming_content)[:8] == b"\x89PNG\r\n\x1a\n"


def test_history_csv_counts_epochs_like_the_run_page(client_user, user, program, demo_dataset):
    run = make_finished_run(user, program, demo_dataset, rewards=(0.2, 0.5))
    body = client_user.get(reverse("training:run-history-csv", args=[run.pk])).content.decode()
    assert [line.split(",")[0] for line in body.splitlines()] == ["epoch", "1", "2"]


def test_candidate_view_diffs_against_its_parent(client_user, user, program, demo_dataset):
    run = make_finished_run(user, program, demo_dataset)
    Candidate.objects.create(
        run=run,
        variable="generator/state",
        candidate_id="c1",
        operation="seed",
        value={"instructions": "Route it.", "examples": []},
        reward=0.1,
        status="scored",
    )
    child = Candidate.objects.create(
        run=run,
        variable="generator/state",
        candidate_id="c2",
        parent_ids=["c1"],
        operation="few_shot",
        value={
            "instructions": "Route it.",
            "examples": [{"inputs": {"message": "<b>hi</b>"}, "outputs": {"team": "ledger"}}],
        },
        reward=0.5,
        status="best",
    )
    html = client_user.get(child.get_absolute_url()).content.decode()
    assert (
        'class="diff-add"' in html and "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>hi</b>" not in html
    )
    assert "c1" in html and "0.500" in html


def test_home_puts_each_program_one_click_from_a_launch_and_lists_own_runs(
    client_user, user, other_user, program, demo_dataset
):
    mine = make_run(user, program, demo_dataset)
    theirs_program = make_program(other_user, create_demo_dataset(other_user), name="Theirs")
    make_run(other_user, theirs_program, theirs_program.dataset)
    html = client_user.get("/").content.decode()
    launch = f"{reverse('training:run-create')}?program={program.pk}"
    assert launch in html and "Router" in html
    assert mine.get_absolute_url() in html and "All 1 run" in html
    assert "Theirs" not in html


def test_home_for_a_new_user_points_to_datasets(client_user):
    html = client_user.get("/").content.decode()
    assert "No program yet" in html and reverse("datasets:list") in html
    # no run to start "above" and no Quick try to press: it says to build a program first
    assert "No run yet: a run trains a program, so build one first (above)." in html
    assert "first run above" not in html and "Quick try" not in html
