"""NearestFewShot in the dashboard: offered, configured, forecast, executed and shown;
refused junk rewrites stored and listed; a run that did not learn says why and links to the
launch form pre-filled with the next step; the demo program declares its label set.

Runs are executed in-process (``attempt.execute``, as the worker does) on the scripted fake
models: ``fake/fewshot`` answers the majority of the examples in its prompt, so the retrieved
examples make it learn; ``fake/embedding`` embeds texts by their words.
"""

from __future__ import annotations

import html as html_lib
import re
from typing import get_args

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

import training.engine as synalinks
from tests.training.conftest import make_run, run_config
from tests.training.helpers_programs import make_program
from training.engine.modules import example_retrieval
from training.execution import attempt as execution
from training.execution import forecast
from training.execution.recording.persistence import PersistenceCallback
from training.execution.run_config import RunConfigError, build_optimizer
from training.models import Candidate, Run
from training.programs.demo import ensure_demo_program
from training.programs.programs import program_from_json
from training.runs import prefill

NEAREST = {
    "optimizer": "NearestFewShot",
    "nfs_embedding_model": "fake/embedding",
    "nfs_k": 3,
    "epochs": 1,
    "evaluations_before": 1,
    "evaluations_after": 1,
}


def executed(user, dataset, model="fake/fewshot", **overrides) -> Run:
    program = make_program(user, dataset, model=model)
    run = make_run(user, program, dataset, run_config(model=model, **overrides))
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    return run


def field_tag(html: str, name: str) -> str:
    match = re.search(rf'<(?:input|select)[^>]*name="{name}"[^>]*>', html)
    assert match, name
    return match.group(0)


# -- the launch form and the configuration ----------------------------------------------------


@pytest.mark.django_db
def test_launch_form_offers_nearest_few_shot_with_its_bounded_fields(client_user, program):
    html = client_user.get(reverse("training:run-create") + f"?program={program.pk}").content
    html = html.decode()
    assert '<option value="NearestFewShot">NearestFewShot</option>' in html
    k = field_tag(html, "nfs_k")
    assert 'min="1"' in k and f'max="{example_retrieval.MAX_K}"' in k and 'value="4"' in k
    pool = field_tag(html, "nfs_pool_size")
    assert f'max="{example_retrieval.MAX_POOL_SIZE}"' in pool and 'value="256"' in pool
    assert 'type="checkbox"' in field_tag(html, "nfs_vote")
    embedding = field_tag(html, "nfs_embedding_model")
    assert f'value="{django_settings.TRAINBOARD_EMBEDDING_MODEL}"' in embedding
    # the help says when to pick it
    assert "the training examples most like the input" in html
    assert "The one to pick when the program answers a label set" in html  # CalibratedLabels
    # its fields are in their own box, hidden while another optimizer is chosen
    assert re.search(r'class="optimizer-params" data-optimizer="NearestFewShot" hidden', html)


def test_configuration_builds_the_engine_optimizer_within_its_bounds():
    config = run_config(**{**NEAREST, "nfs_k": 6, "nfs_pool_size": 40, "nfs_vote": False})
    assert config["optimizer"] == {
        "name": "NearestFewShot",
        "params": {
            "embedding_model": "fake/embedding",
            "k": 6,
            "pool_size": 40,
            "vote": False,
        },
    }
    optimizer = build_optimizer(config)
    assert isinstance(optimizer, synalinks.optimizers.NearestFewShot)
    assert (optimizer.k, optimizer.pool_size, optimizer.vote) == (6, 40, False)
    assert optimizer.embedding_model.model == "fake/embedding"
    assert optimizer.seed == config["seed"]

    # no embedding model given: the run records the server's default
    default = run_config(**{**NEAREST, "nfs_embedding_model": ""})
    assert default["optimizer"]["params"]["embedding_model"] == (
        django_settings.TRAINBOARD_EMBEDDING_MODEL
    )
    # out of bounds, or a mistyped model: the message lands on the field
    with pytest.raises(RunConfigError) as refused:
        run_config(**{**NEAREST, "nfs_k": example_retrieval.MAX_K + 1})
    assert set(refused.value.errors) == {"nfs_k"}
    assert str(example_retrieval.MAX_K) in refused.value.errors["nfs_k"]
    with pytest.raises(RunConfigError) as refused:
        run_config(**{**NEAREST, "nfs_embedding_model": "minilm"})
    assert "provider/name" in refused.value.errors["nfs_embedding_model"]


@pytest.mark.django_db
def test_the_forecast_counts_the_embedding_requests_and_the_form_shows_them(
    client_user, program, demo_dataset
):
    config = run_config(**NEAREST)
    result = forecast.forecast(program, demo_dataset, config)
    assert result["parts"]["embeddings"]["expected"] > 0
    assert result["parts"]["optimizer"]["high"] == 0  # no LM call of its own
    query = {
        "program": program.pk,
        "dataset": demo_dataset.pk,
        "reward": "ExactMatch",
        **{key: value for key, value in NEAREST.items()},
        "batch_size": 8,
        "validation_split": 0.25,
        "seed": 7,
    }
    html = client_user.get(reverse("training:run-forecast"), query).content.decode()
    shown = re.search(r'id="forecast-embeddings"[^>]*>([^<]+)<', html)
    assert shown, html
    assert str(result["parts"]["embeddings"]["expected"]) in shown.group(1)


# -- a run, its candidate page ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_nearest_few_shot_run_learns_and_its_candidate_page_summarises_the_pool(
    client_user, user, demo_dataset
):
    run = executed(user, demo_dataset, **NEAREST)
    assert run.final_reward > run.baseline_reward
    pooled = Candidate.objects.get(run=run, value__has_key="retrieval")
    retrieval = pooled.value["retrieval"]
    assert retrieval["k"] == 3 and retrieval["embedding_model"] == "fake/embedding"
    trained = program_from_json(run.trained_program_json).get_variables()["generator/state"]
    assert len(trained["retrieval"]["pool"]) == len(retrieval["pool"])
    assert run.usage["by_model"]["fake/embedding"]["calls"] > 0

    page = client_user.get(pooled.get_absolute_url()).content.decode()
    summary = page[page.index('id="candidate-retrieval"') :]
    assert re.search(
        rf"<strong>3</strong> nearest of <strong>{len(retrieval['pool'])}</strong>", summary
    )
    assert "fake/embedding" in summary and "told which answer they gave most" in summary
    first = retrieval["pool"][0]
    assert html_lib.escape(first["inputs"]["message"]) in summary
    # never a vector: not on the page, not in the diff against the seed
    for example in retrieval["pool"]:
        assert example["vector"] not in page
    diff = page[page.index('id="candidate-diff"') :]
    assert f"3 nearest of {len(retrieval['pool'])} pooled examples by fake/embedding" in diff
    assert '"vector"' not in page


# -- refused rewrites ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_refused_rewrites_of_an_omega_run_are_stored_and_listed(client_user, user, demo_dataset):
    # OMEGA's model answers every field with nothing: each rewrite is refused before scoring
    run = executed(
        user,
        demo_dataset,
        optimizer="OMEGA",
        omega_language_model="fake/echo",
        omega_embedding_model="fake/embedding",
        omega_population_size=4,
        epochs=2,
    )
    assert run.refusals["count"] > 0
    by_rule = {rule: entry["count"] for rule, entry in run.refusals["rules"].items()}
    assert sum(by_rule.values()) == run.refusals["count"]
    board = client_user.get(run.get_absolute_url()).content.decode()
    board = board[board.index('id="run-leaderboard"') :]
    refused = board[board.index('id="run-refusals"') :]
    assert f"{run.refusals['count']} rewrites refused before scoring" in refused
    for rule, entry in run.refusals["rules"].items():
        assert re.search(
            rf'data-rule="{rule}"><td class="refusal-count">{entry["count"]}</td>'
            rf"<td>refused: {re.escape(entry['reason'])}</td>",
            refused,
        )


@pytest.mark.django_db(transaction=True)
def test_a_refused_text_is_kept_clipped_bounded_and_shown_escaped(client_user, user, program):
    run = make_run(user, program, program.dataset, status=Run.RUNNING)
    callback = PersistenceCallback(run.pk, run.attempt, run.group_name, tracker=None, base_usage={})
    script = "<script>window.__refused = 1</script>" + "again " * 60
    for epoch in range(5):
        callback._on_candidate_refused(
            {
                "type": "candidate_refused",
                "epoch": epoch,
                "variable": "generator/state",
                "operation": "mutation",
                "parent_ids": ["c0"],
                "rule": "repeats",
                "reason": "the text repeats itself",
                "field": "instructions",
                "text": script,
            }
        )
    run.refresh_from_db()
    entry = run.refusals["rules"]["repeats"]
    assert run.refusals["count"] == entry["count"] == 5
    assert [item["epoch"] for item in entry["latest"]] == [4, 3, 2]  # the latest few, newest first
    assert all(len(item["text"]) == 200 for item in entry["latest"])
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert "<script>window.__refused" not in html
    assert "&lt;script&gt;window.__refused = 1&lt;/script&gt;" in html
    assert "refused: the text repeats itself" in html


# -- a run that says why ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_run_that_kept_its_seed_says_so_with_its_evidence_and_the_next_steps(
    client_user, user, demo_dataset
):
    # fake/echo leaves the answer empty whatever the examples: no candidate can beat the seed
    run = executed(user, demo_dataset, model="fake/echo", epochs=2)
    entry = run.selection["generator/state"]
    assert entry["candidates"] > 0 and entry["beat_seed"] == 0
    assert run.outcome == Run.NO_BETTER
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'data-outcome="no_better">No better than the seed</span>' in html  # not "Succeeded"
    happened = html[html.index('id="run-happened"') :]
    assert (
        f"None of the {entry['candidates']} candidates scored better than the starting "
        "program beyond noise, so the run kept it" in happened
    )
    steps = html[html.index('id="run-next-steps"') :]
    keys = re.findall(r'<li data-step="([a-z_]+)">', steps)
    # `team` takes three values the program does not declare; 9 validation rows are few;
    # RandomFewShot draws new examples each epoch
    assert keys == ["label_set", "more_rows", "more_epochs"]
    links = {}
    for key, href in re.findall(r'data-step-link="([a-z_]+)" href="([^"]+)"', steps):
        links.setdefault(key, html_lib.unescape(href))  # each step's first link
    assert links["label_set"] == reverse("training:program-create") + f"?dataset={demo_dataset.pk}"
    assert links["more_rows"] == reverse("datasets:detail", args=[demo_dataset.pk])
    assert "About 116 rows tell a gain of 0.10" in steps


@pytest.mark.django_db(transaction=True)
def test_a_label_task_that_kept_its_seed_is_offered_the_labels_decided_from_scores(
    client_user, user, demo_dataset
):
    program = ensure_demo_program(user, model="fake/echo")  # `team` declared a label set
    run = make_run(user, program, demo_dataset, run_config(model="fake/echo", epochs=1))
    assert execution.execute(run.pk, run.attempt) == Run.SUCCEEDED
    run.refresh_from_db()
    html = client_user.get(run.get_absolute_url()).content.decode()
    steps = html[html.index('id="run-next-steps"') :]
    found = dict(re.findall(r'data-step-link="([a-z_]+)" href="([^"]+)"', steps))
    form = client_user.get(html_lib.unescape(found["decide_labels"])).content.decode()
    assert '<option value="CalibratedLabels" selected>CalibratedLabels</option>' in form
    assert re.search(rf'<option value="{program.pk}" selected>', form)
    assert 'value="1"' in field_tag(form, "epochs")  # its card: one epoch suffices


@pytest.mark.django_db(transaction=True)
def test_a_run_that_learned_says_so_and_offers_no_next_steps(client_user, user, demo_dataset):
    run = executed(user, demo_dataset, **NEAREST)
    assert run.selection["generator/state"]["beat_seed"] >= 1
    assert run.outcome == Run.IMPROVED  # 0.000 -> 0.417 on 12 test rows, beyond noise
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'data-outcome="improved">Improved</span>' in html
    happened = html[html.index('id="run-happened"') :]
    assert "Training helped: the trained program scored 0.000 → 0.417" in happened
    assert "Test: +0.417 (95% interval" in happened
    assert 'id="run-next-steps"' not in html  # nothing to try next


@pytest.mark.django_db
def test_the_launch_form_reads_its_initial_values_from_the_address(
    client_user, user, other_user, program, demo_dataset
):
    url = prefill.launch_url(
        program=program.pk, dataset=demo_dataset.pk, optimizer="OMEGA", epochs=7, shuffle=False
    )
    html = client_user.get(url).content.decode()
    assert '<option value="OMEGA" selected>OMEGA</option>' in html
    assert 'value="7"' in field_tag(html, "epochs")
    assert "checked" not in field_tag(html, "shuffle")
    # another user's program is not pre-filled, and the address launches nothing by itself
    theirs = make_program(other_user, demo_dataset, name="Theirs")
    html = client_user.get(prefill.launch_url(program=theirs.pk)).content.decode()
    assert f'<option value="{theirs.pk}"' not in html
    assert not Run.objects.exists()


# -- the demo -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_demo_program_declares_its_label_set_and_the_home_page_offers_a_quick_try(
    client_user, user
):
    program = ensure_demo_program(user, model="fake/fewshot")
    engine = program_from_json(program.engine_json)
    generator = next(m for m in engine.modules if hasattr(m, "output_data_model"))
    annotation = generator.output_data_model.model_fields["team"].annotation
    assert sorted(get_args(annotation)) == ["box", "bug", "money"]
    html = client_user.get(reverse("training:home")).content.decode()
    quick = re.search(
        r'<form method="post" action="([^"]+)" class="inline quick-try-form">.*?'
        r'title="Launches now: ([^"]+), the test split',
        html,
    )
    assert quick and quick.group(2) == "CalibratedLabels, 1 epoch"
    # one press launches it: a label set's labels decided from their scores, one epoch
    response = client_user.post(quick.group(1))
    run = Run.objects.get(program=program)
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.config["optimizer"]["name"] == "CalibratedLabels" and run.config["epochs"] == 1
