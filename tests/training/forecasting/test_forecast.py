"""The launch form's forecast: counted from the configuration, sized from the program's
prompts, timed at what recent runs of the model observed per call (no time before a first
run), never waiting on a worker, stored at launch and compared with what the run did."""

from __future__ import annotations

import html as html_module
import re

import pytest
from django.core import signing
from django.urls import reverse

from tests.training.conftest import make_program, make_run, run_config
from tests.training.test_views import launch_data
from training.execution import attempt as execution
from training.execution import forecast as forecast_services
from training.execution import forecast_text
from training.execution.pace import learning, measured
from training.forecasting.measured import JUDGE_ANSWER_TOKENS, Observation
from training.models import ModelPace, Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_broker(monkeypatch):
    """Launches are executed here, in the test: record what would be sent."""
    sent = []

    def record(args, **options):
        sent.append(args)
        return type("R", (), {"id": f"t{len(sent)}"})()

    monkeypatch.setattr("training.execution.tasks.execute_run.apply_async", record)
    return sent


def stored_observation(model: str, seconds: float = 0.05, tokens: float = 200.0) -> None:
    """A finished run's observation of ``model``'s predictions, as a worker keeps it."""
    seen = Observation(seconds={"prediction": seconds}, tokens={"prediction": tokens})
    ModelPace.objects.update_or_create(
        model=model, defaults={"sizes": {measured.OBSERVED_KEY: [seen.to_dict()]}}
    )


def omega_sizes(program, dataset, model: str, **fields) -> dict:
    """The sizes of each kind of call an OMEGA run of ``program`` is forecast with."""
    config = run_config(
        optimizer="OMEGA", model=model, omega_embedding_model="fake/minilm", **fields
    )
    return forecast_services.forecast(program, dataset, config)["sizes"]


def forecast_html(client, program, dataset, **overrides) -> str:
    response = client.get(
        reverse("training:run-forecast"), launch_data(program, dataset, **overrides)
    )
    assert response.status_code == 200
    return response.content.decode()


def calls_in(html: str) -> int:
    return int(re.search(r'data-calls="(\d+)"', html).group(1))


def seconds_in(html: str) -> int:
    return int(re.search(r'data-seconds="(\d+)"', html).group(1))


def test_a_model_never_run_shows_calls_and_tokens_and_the_time_after_a_first_run(
    client_user, user, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    program = make_program(user, demo_dataset, model="fake/fewshot")
    form = forecast_html(client_user, program, demo_dataset)
    assert 'data-state="untimed"' in form and "data-seconds" not in form
    assert calls_in(form) > 0
    tokens = re.search(r'id="forecast-tokens">about (\d+) \((\d+)–(\d+)\)</dd>', form)
    assert int(tokens.group(1)) > 0
    # one epoch: nothing left to the answers, the tokens are one figure as the calls are
    one = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert re.search(r'id="forecast-calls">\d+</dd>', one)
    assert re.search(r'id="forecast-tokens">\d+</dd>', one)
    assert (
        '<dd id="forecast-time" data-known="false">known after a first run on this model</dd>'
        in form
    )
    assert "time known after a first run on this model</p>" in form  # the summary line
    assert "hx-trigger" not in form  # nothing to wait for: the form asks nothing again
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(reverse("training:run-create"), {**launch_data(program, demo_dataset)})
    run = Run.objects.get(owner=user)
    assert run.forecast["seconds"] is None
    assert run.forecast["tokens"]["expected"] == int(tokens.group(1))
    page = client_user.get(run.get_absolute_url()).content.decode()
    section = page[page.index('id="run-forecast-actual"') :]
    # the same Time cell as the form's
    assert '<tr data-row="Time"><th scope="row">Time</th><td>known after a first run on' in (
        section
    )
    assert "the forecast has calls and tokens, and the time is known after a first run" in (section)


def test_omega_s_mutations_are_sized_as_recent_runs_measured_them(user, demo_dataset, no_broker):
    program = make_program(user, demo_dataset, model="fake/rules")
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_embedding_model="fake/minilm")
    before = forecast_services.forecast(program, demo_dataset, config)
    assert before["parts"]["optimizer"]["expected"] > 0
    assert any("each mutation call" in note for note in before["assumptions"])
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    # The fake's answers are 10 prompt + 5 completion tokens: what the traces measured.
    sizes = measured.stored_sizes("fake/rules")
    assert sizes["mutation"] == {"prompt": 10.0, "completion": 5.0}
    after = forecast_services.forecast(program, demo_dataset, config)
    assert after["sizes"]["mutation"]["completion"] == 5.0
    assert not any("each mutation call" in note for note in after["assumptions"])
    assert after["measured"]["observed"] == {"prediction": 1, "mutation": 1}
    assert after["seconds"]["expected"] > 0


def test_a_mutation_is_sized_by_the_batch_items_its_lm_is_shown(user, demo_dataset):
    # The evolver shows its LM the worst MAX_BATCH_ITEMS of a batch: a batch of 16 makes no
    # longer a mutation prompt than a batch of 4 (sized by all 16, the bench's first OMEGA
    # run was forecast 803 prompt tokens a mutation where the traces measured 545).
    from training.engine.optimizers.mutation import MAX_BATCH_ITEMS

    program = make_program(user, demo_dataset, model="fake/rules")
    stored_observation("fake/rules")

    def mutation_prompt(batch_size):
        sizes = omega_sizes(program, demo_dataset, "fake/rules", batch_size=batch_size)
        return sizes["mutation"]["prompt"]

    assert mutation_prompt(16) == mutation_prompt(MAX_BATCH_ITEMS) > mutation_prompt(1)


def test_an_lm_judge_is_sized_by_an_assumption_until_a_run_measures_it(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/rules", epochs=1
    )
    before = forecast_services.forecast(program, demo_dataset, config)
    assert before["parts"]["judge"]["expected"] > 0
    assert before["sizes"]["judge"]["completion"] == JUDGE_ANSWER_TOKENS  # a short critique
    assert any(note.startswith("each judge call ~") for note in before["assumptions"])
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    after = forecast_services.forecast(program, demo_dataset, config)
    assert after["sizes"]["judge"] == {"prompt": 10.0, "completion": 5.0, "fresh": None}
    assert not any(note.startswith("each judge call") for note in after["assumptions"])


def test_an_lm_judge_never_measured_is_sized_by_its_own_prompt(user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/rules")

    def judge_prompt(criteria: str, **fields) -> float:
        config = run_config(
            model="fake/rules",
            reward="LMAsJudge",
            reward_language_model="fake/rules",
            reward_criteria=criteria,
            epochs=1,
            **fields,
        )
        found = forecast_services.forecast(program, demo_dataset, config)
        return found["sizes"]["judge"]["prompt"]

    short, long = judge_prompt("accuracy"), judge_prompt("accuracy " + "and tone " * 100)
    # the criteria are in every judgement's prompt: 900 more characters at 4 a token
    assert long - short == pytest.approx(900 / 4, abs=2)
    # people's marks first, the LM judge for the rest: the same judge, the same prompt
    assert judge_prompt("accuracy", reward_human_marks=True) == short


def test_an_lm_judge_is_sized_by_this_programs_runs_on_this_data_before_other_programs(
    user, demo_dataset, no_broker
):
    # A judge's critique follows the labels it compares: after this program's run on the
    # demo (5 answer tokens a judgement), another program's runs set the model's judge size
    # to 150 tokens. This program on this data keeps its own; a new program gets the model's.
    program = make_program(user, demo_dataset, model="fake/rules")
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/rules", epochs=1
    )
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    row = ModelPace.objects.get(model="fake/rules")
    key = measured.judge_data_key(program.pk, demo_dataset.pk)
    assert row.sizes[key] == {"prompt": 10.0, "completion": 5.0}
    row.sizes = {**row.sizes, "judge": {"prompt": 300.0, "completion": 150.0}}
    row.save(update_fields=["sizes"])
    own = forecast_services.forecast(program, demo_dataset, config)
    assert own["sizes"]["judge"]["completion"] == 5.0
    assert any("as this program's runs on this data measured" in n for n in own["assumptions"])
    other = make_program(user, demo_dataset, model="fake/rules")
    theirs = forecast_services.forecast(other, demo_dataset, config)
    assert theirs["sizes"]["judge"]["completion"] == 150.0


def test_an_lm_judge_on_another_model_is_sized_by_its_runs_on_that_model(
    user, demo_dataset, no_broker
):
    # The program runs on fake/rules, its judge on fake/fewshot: the judge's tokens are kept
    # in the judge model's row (the forecast reads them there), not the program model's.
    program = make_program(user, demo_dataset, model="fake/rules")
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/fewshot", epochs=1
    )
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    judged = ModelPace.objects.get(model="fake/fewshot").sizes
    key = measured.judge_data_key(program.pk, demo_dataset.pk)
    assert judged["judge"] == judged[key] == {"prompt": 10.0, "completion": 5.0}
    assert "judge" not in measured.stored_sizes("fake/rules")
    after = forecast_services.forecast(program, demo_dataset, config)
    assert after["sizes"]["judge"] == {"prompt": 10.0, "completion": 5.0, "fresh": None}
    assert any("as this program's runs on this data measured" in n for n in after["assumptions"])
    # a run whose forecast kept no key by role: its configuration's
    ModelPace.objects.filter(model="fake/fewshot").update(sizes={})
    old = {k: v for k, v in run.forecast.items() if k != "pace_keys"}
    Run.objects.filter(pk=run.pk).update(forecast=old)
    learning.learn_from_run(run.pk)
    assert ModelPace.objects.get(model="fake/fewshot").sizes["judge"]["completion"] == 5.0


def test_the_oldest_judge_sizes_by_program_are_dropped_whatever_order_the_keys_come_back_in(
    user, demo_dataset, no_broker, monkeypatch
):
    # A JSON object's keys come back in the store's order (PostgreSQL's jsonb: shorter keys
    # first), not the order they were written in: each learn here reads them reversed.
    monkeypatch.setattr(learning, "JUDGE_DATA_KEPT", 2)
    programs = [make_program(user, demo_dataset, model="fake/rules") for _ in range(4)]
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/rules", epochs=1
    )
    run = runs.launch(user, programs[0], demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED

    def learn_for(program):
        Run.objects.filter(pk=run.pk).update(program=program)
        learning.learn_from_run(run.pk)
        row = ModelPace.objects.get(model="fake/rules")
        row.sizes = dict(reversed(list(row.sizes.items())))
        row.save(update_fields=["sizes"])

    def kept():
        sizes = ModelPace.objects.get(model="fake/rules").sizes
        keys = {measured.judge_data_key(p.pk, demo_dataset.pk): p for p in programs}
        return {keys[k] for k in sizes if k in keys}

    for program in (programs[1], programs[2], programs[0], programs[3]):
        learn_for(program)
    # 0 (the run itself), 1, 2, then 0 again and 3: 1 and 2 are the oldest
    assert kept() == {programs[0], programs[3]}


def test_tokens_count_the_examples_a_candidate_carries(user, demo_dataset):
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_observation("local/smollm2")
    result = forecast_services.forecast(program, demo_dataset, run_config(model="local/smollm2"))
    seed = result["sizes"]["prediction_seed"]
    candidates = result["sizes"]["prediction_candidates"]
    assert candidates["prompt"] > seed["prompt"] + 20  # 1–3 examples of the demo's rows
    assert seed["fresh"] < seed["prompt"]  # the shared system prompt is evaluated once


def test_omega_s_candidates_carry_the_examples_they_sample(user, demo_dataset):
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_observation("local/smollm2")

    def candidates(few_shot: bool) -> float:
        sizes = omega_sizes(
            program, demo_dataset, "local/smollm2", omega_few_shot_learning=few_shot
        )
        return sizes["prediction_candidates"]["prompt"]

    assert candidates(True) > candidates(False) + 20  # 1–3 examples of the demo's rows


def test_a_prediction_is_sized_by_the_share_of_calls_under_candidates(user, demo_dataset):
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_observation("local/smollm2")
    result = forecast_services.forecast(program, demo_dataset, run_config(model="local/smollm2"))
    parts, sizes = result["parts"], result["sizes"]

    def total(name: str) -> float:
        return sizes[name]["prompt"] + sizes[name]["completion"]

    calls = parts["predictions"]["expected"] + parts["evaluations"]["expected"]
    under = parts["candidate_predictions"]["expected"]
    assert 0 < under < parts["predictions"]["expected"]  # the seed's own predictions besides
    assert measured.sized(result)["prediction"] == pytest.approx(
        (under * total("prediction_candidates") + (calls - under) * total("prediction_seed"))
        / calls,
        rel=0.01,
    )


def test_a_queue_says_when_the_run_starts(client_user, user, demo_dataset, settings):
    settings.TRAINBOARD_WORKER_CONCURRENCY = 1
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_observation("local/smollm2")
    alone = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "starting in" not in alone
    make_run(
        user,
        program,
        demo_dataset,
        status=Run.RUNNING,
        active_seconds=20.0,
        forecast={"seconds": {"low": 80.0, "expected": 100.0, "high": 130.0}},
    )
    behind = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "starting in about 80 s" in behind  # the running run's forecast, less its time
    assert "1 running, 0 queued, 1 worker processes" in behind
    settings.TRAINBOARD_WORKER_CONCURRENCY = 2  # now both run at once
    assert "starting in" not in forecast_html(client_user, program, demo_dataset, epochs="1")
    # a run ahead with no time (its model's first): the wait is not known, and says so
    make_run(user, program, demo_dataset, status=Run.QUEUED, forecast={"seconds": None})
    behind_untimed = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "starting when a worker is free (1 run ahead has no time yet)" in behind_untimed
    assert "starting in about" not in behind_untimed


def test_the_answer_echoes_the_forms_revision(client_user, program, demo_dataset):
    html = forecast_html(client_user, program, demo_dataset, forecast_revision="17")
    assert 'id="forecast-answer" data-revision="17"' in html
    odd = forecast_html(client_user, program, demo_dataset, forecast_revision="1<b>")
    assert 'data-revision=""' in odd  # only digits are echoed
    problem = forecast_html(client_user, program, demo_dataset, epochs="0", forecast_revision="18")
    assert 'data-revision="18"' in problem


def test_the_form_forecast_follows_the_epochs(client_user, program, demo_dataset):
    stored_observation(program.model)
    one = forecast_html(client_user, program, demo_dataset, epochs="1")
    three = forecast_html(client_user, program, demo_dataset, epochs="3")
    assert calls_in(three) > calls_in(one)
    assert seconds_in(three) > seconds_in(one)
    assert 'data-state="timed"' in three


def test_an_incomplete_form_says_what_is_missing(client_user, program, demo_dataset):
    html = forecast_html(client_user, program, demo_dataset, epochs="0")
    assert "Forecast: epochs: must be" in html
    assert "data-calls" not in html


def test_another_users_program_gets_no_forecast(client, other_user, program, demo_dataset):
    client.force_login(other_user)
    html = forecast_html(client, program, demo_dataset)
    assert "Select a valid choice" in html and "data-calls" not in html


def test_the_launch_form_stores_the_forecast_and_the_caps(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    stored_observation(program.model)
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(
            reverse("training:run-create"),
            launch_data(program, demo_dataset, budget_calls="50", budget_minutes="2.5"),
        )
    run = Run.objects.get(owner=user)
    assert run.config["budget_calls"] == 50 and run.config["budget_minutes"] == 2.5
    assert run.config["budget_cost"] is None
    assert run.forecast["calls"]["expected"] > 0 and run.forecast["seconds"]["expected"] > 0
    assert run.forecast["batch_size"] == 8
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "Forecast at launch" in page and "Cap on LM calls" in page


def test_a_finished_run_lands_within_the_forecast_it_stored_at_launch(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_observation("fake/rules")
    config = run_config(
        optimizer="OMEGA", model="fake/rules", omega_embedding_model="fake/minilm", epochs=2
    )
    run = runs.launch(user, program, demo_dataset, config)
    stored = Run.objects.get(pk=run.pk).forecast
    assert stored["seconds"]["low"] > 0
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    run.refresh_from_db()
    assert stored["calls"]["low"] <= run.lm_calls <= stored["calls"]["high"]
    rows = {row["label"]: row for row in forecast_text.comparison(run)}
    assert rows["LM calls"]["actual"] == str(run.lm_calls)
    assert rows["LM calls"]["error"] == round(
        100 * (run.lm_calls - stored["calls"]["expected"]) / stored["calls"]["expected"]
    )
    assert set(rows) == {"LM calls", "Tokens", "Cost", "Time"}


def test_the_form_warns_when_a_calls_cap_is_below_the_forecast(client_user, program, demo_dataset):
    plain = forecast_html(client_user, program, demo_dataset, epochs="2")
    total = calls_in(plain)
    assert "forecast-cap-warning" not in plain
    roomy = forecast_html(client_user, program, demo_dataset, epochs="2", budget_calls=str(total))
    assert "forecast-cap-warning" not in roomy  # a cap at the forecast: no warning
    html = forecast_html(
        client_user, program, demo_dataset, epochs="2", budget_calls=str(total // 2)
    )
    warning = re.search(
        r"forecast-cap-warning[^>]*>This cap \((\d+) LM calls\) is below the forecast \((\d+)\): "
        r"it stops the run after about (\d+) of (\d+) batches",
        html,
    )
    assert warning, html
    cap, forecast_total, done, batches = map(int, warning.groups())
    assert (cap, forecast_total) == (total // 2, total)
    assert 0 < done < batches
    tiny = forecast_html(client_user, program, demo_dataset, epochs="2", budget_calls="3")
    assert "it leaves no calls for training" in tiny


def shown_value(html: str) -> str:
    return html_module.unescape(re.search(r'name="forecast_shown" value="([^"]+)"', html).group(1))


def test_a_launch_stores_the_forecast_the_form_showed_for_those_values(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    stored_observation(program.model)
    shown = shown_value(forecast_html(client_user, program, demo_dataset))
    ModelPace.objects.all().delete()  # the observations move on after the form answered
    data = {**launch_data(program, demo_dataset), "forecast_shown": shown}
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(reverse("training:run-create"), data)
    run = Run.objects.get(owner=user)
    carried = signing.loads(shown, salt="trainboard.forecast-shown")["forecast"]
    assert run.forecast == carried and run.forecast["seconds"]["expected"] > 0


def test_a_forecast_shown_for_other_values_or_tampered_with_is_made_anew(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    stored_observation(program.model)
    shown = shown_value(forecast_html(client_user, program, demo_dataset, epochs="1"))
    for value in (shown, shown[:-3] + "abc"):
        data = {**launch_data(program, demo_dataset, epochs="2"), "forecast_shown": value}
        with django_capture_on_commit_callbacks(execute=True):
            client_user.post(reverse("training:run-create"), data)
    launched = list(Run.objects.filter(owner=user).order_by("pk"))
    carried = signing.loads(shown, salt="trainboard.forecast-shown")["forecast"]
    made_now = forecast_services.at_launch(program, demo_dataset, launched[0].config)
    for run in launched:
        assert run.config["epochs"] == 2
        assert run.forecast["calls"] != carried["calls"]
        assert run.forecast["calls"] == made_now["calls"]
