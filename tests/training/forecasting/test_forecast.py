"""The launch form's forecast: counted from the configuration, timed at the pace a worker
measured (its calibration, then every run it ends), never waiting on a worker, stored at
launch and compared with what the run did."""

from __future__ import annotations

import html as html_module
import re
import threading
import time
from types import SimpleNamespace

import pytest
from django.core import signing
from django.urls import reverse

from tests.support.waiting import until
from tests.training.conftest import make_program, make_run, run_config
from tests.training.test_views import launch_data
from training.execution import attempt as execution
from training.execution import forecast as forecast_services
from training.execution import forecast_text
from training.execution.pace import calibration, learning
from training.forecasting.pace import Pace
from training.models import ModelPace, Run
from training.runs import launch as runs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_requests_remembered():
    calibration._requested.clear()
    yield
    calibration._requested.clear()


@pytest.fixture(autouse=True)
def _the_pace_rule(monkeypatch):
    """These tests check the pace's rule (its tokens and time); the figures recent runs
    observed per call are checked in test_forecast_measured.py."""
    monkeypatch.setattr(forecast_services, "OBSERVED", False)


@pytest.fixture
def no_broker(monkeypatch):
    """Launches and calibrations are executed here, in the test: record what would be sent."""
    sent = []

    def record(args, **options):
        sent.append(args)
        return type("R", (), {"id": f"t{len(sent)}"})()

    monkeypatch.setattr("training.execution.tasks.execute_run.apply_async", record)
    monkeypatch.setattr(calibration.calibrate_model, "apply_async", record)
    return sent


def stored_pace(model: str, **values) -> Pace:
    """A pace as a worker's calibration stores it (local/smollm2 here: no model is loaded)."""
    pace = Pace(
        **{
            "call_seconds": 0.1,
            "prompt_token_seconds": 0.002,
            "short_token_seconds": 0.05,
            "long_token_seconds": 0.05,
            "parallel": 2.0,
            "chars_per_token": 4.0,
            **values,
        }
    )
    ModelPace.objects.update_or_create(model=model, defaults={"pace": pace.to_dict()})
    return pace


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


def test_a_model_never_measured_is_calibrated_by_a_worker_and_then_timed(
    client_user, user, demo_dataset, no_broker, monkeypatch
):
    asks = []  # the threads calibration.request started to ask a worker

    class NotedThread(threading.Thread):
        def start(self):
            asks.append(self)
            super().start()

    monkeypatch.setattr(
        calibration, "threading", SimpleNamespace(Thread=NotedThread, Lock=threading.Lock)
    )
    program = make_program(user, demo_dataset, model="fake/fewshot?latency=0.05")
    first = forecast_html(client_user, program, demo_dataset)
    assert 'data-state="measuring"' in first and "data-seconds" not in first
    assert "a short calibration, once" in first
    assert len(asks) == 1
    asks[0].join(5)  # a worker was asked, from a thread
    assert no_broker == [["fake/fewshot?latency=0.05"]]
    forecast_html(client_user, program, demo_dataset, epochs="3")
    assert len(asks) == 1  # asked once, not on every change of the form
    assert len(no_broker) == 1
    # The worker's task: a few calls alone and a burst together, on the model itself.
    calibration.calibrate_model("fake/fewshot?latency=0.05")
    pace, _ = calibration.current("fake/fewshot?latency=0.05")
    assert 0.04 <= pace.call_seconds <= 0.5  # its latency, measured
    assert pace.parallel > 1.5  # the fake answers a burst at once
    assert pace.judge_size == (10.0, 5.0)  # an LM judge's call, as LMAsJudge asks it
    ready = forecast_html(client_user, program, demo_dataset)
    assert 'data-state="ready"' in ready and seconds_in(ready) > 0
    assert re.search(r"about \d+ calls, \d+ (k )?tokens, \$0\.00, \d+–\d+ (s|min)", ready)
    assert "Assumes:" in ready and "calibration" in ready


def test_the_time_forecast_lands_on_the_run_after_the_worker_learned_from_a_few(
    user, demo_dataset, no_broker
):
    # What the calibration says and what a run takes differ (the database, the pages, the
    # machine's load); the worker learns it from each run it ends (a shrunk median: the
    # first run moves it half way, the third 7/8), and the next forecasts of the model hold it.
    program = make_program(user, demo_dataset, model="fake/rules?latency=0.03")
    calibration.measure("fake/rules?latency=0.03")
    config = run_config(model="fake/rules?latency=0.03", epochs=2, batch_size=4)
    for _ in range(3):
        run = runs.launch(user, program, demo_dataset, config)
        assert Run.objects.get(pk=run.pk).forecast["state"] == "ready"
        assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    pace, _ = calibration.current("fake/rules?latency=0.03")
    assert pace.runs == 3 and len(pace.time_ratios) == 3
    # what the runs taught (its rule: tests/engine/forecasting/test_pace.py)
    assert pace.time_factor != 1.0
    last = runs.launch(user, program, demo_dataset, config)
    assert "pace as 3 recent run(s)" in "; ".join(
        Run.objects.get(pk=last.pk).forecast["assumptions"]
    )
    # How close the learned forecast lands is a speed figure, measured where the machine's
    # load is reported with it: bench/forecast_accuracy.py (a timed test here flaked on a
    # loaded machine).


def test_omega_is_timed_with_its_mutations_as_recent_runs_measured_them(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules", long_token_seconds=0.4)
    config = run_config(optimizer="OMEGA", model="fake/rules", omega_embedding_model="fake/minilm")
    before = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert before["state"] == "ready" and before["parts"]["optimizer"]["expected"] > 0
    assert before["seconds_parts"]["optimizer"] > 0  # OMEGA's time forecast includes them
    assert any("each mutation call" in note for note in before["assumptions"])
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    # The fake's answers are 10 prompt + 5 completion tokens: what the traces measured.
    _, sizes = calibration.current("fake/rules")
    assert sizes["mutation"] == {"prompt": 10.0, "completion": 5.0}
    after = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert after["sizes"]["mutation"]["completion"] == 5.0
    assert not any("each mutation call" in note for note in after["assumptions"])
    # A mutation is a long structured answer: its generated tokens at the long rate.
    pace, _ = calibration.current("fake/rules")
    # Timed by their own factor, learnt from their traced latency (one at a time).
    assert pace.optimizer_runs == 1 and len(pace.optimizer_ratios) == 1
    assert after["pace"]["mutation_seconds"] == pytest.approx(
        (pace.call_seconds + 10 * pace.prompt_token_seconds + 5 * 0.4) * pace.optimizer_time_factor
    )
    assert "optimizer calls as 1 recent run(s) timed them" in after["assumptions"]


def test_a_mutation_is_sized_by_the_batch_items_its_lm_is_shown(user, demo_dataset):
    # The evolver shows its LM the worst MAX_BATCH_ITEMS of a batch: a batch of 16 makes no
    # longer a mutation prompt than a batch of 4 (sized by all 16, the bench's first OMEGA
    # run was forecast 803 prompt tokens a mutation where the traces measured 545).
    from training.engine.optimizers.mutation import MAX_BATCH_ITEMS

    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules")

    def mutation_prompt(batch_size):
        config = run_config(
            optimizer="OMEGA",
            model="fake/rules",
            omega_embedding_model="fake/minilm",
            batch_size=batch_size,
        )
        found = forecast_services.forecast(program, demo_dataset, config, measure=False)
        return found["sizes"]["mutation"]["prompt"]

    assert mutation_prompt(16) == mutation_prompt(MAX_BATCH_ITEMS) > mutation_prompt(1)


def test_an_lm_judge_is_sized_by_the_calibrations_judge_call_until_a_run_measures_it(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules", judge_size=(150.0, 90.0))
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/rules", epochs=1
    )
    before = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert before["parts"]["judge"]["expected"] > 0
    assert before["sizes"]["judge"]["completion"] == 90.0
    assert any("the calibration's judge call" in note for note in before["assumptions"])
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    after = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert after["sizes"]["judge"] == {"prompt": 10.0, "completion": 5.0, "fresh": None}
    assert not any("judge call" in note for note in after["assumptions"])


def test_an_lm_judge_is_sized_by_this_programs_runs_on_this_data_before_other_programs(
    user, demo_dataset, no_broker
):
    # A judge's critique follows the labels it compares: after this program's run on the
    # demo (5 answer tokens a judgement), another program's runs set the model's judge size
    # to 150 tokens. This program on this data keeps its own; a new program gets the model's.
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules", judge_size=(150.0, 90.0))
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/rules", epochs=1
    )
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    row = ModelPace.objects.get(model="fake/rules")
    key = calibration.judge_data_key(program.pk, demo_dataset.pk)
    assert row.sizes[key] == {"prompt": 10.0, "completion": 5.0}
    row.sizes = {**row.sizes, "judge": {"prompt": 300.0, "completion": 150.0}}
    row.save(update_fields=["sizes"])
    own = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert own["sizes"]["judge"]["completion"] == 5.0
    assert any("as this program's runs on this data measured" in n for n in own["assumptions"])
    other = make_program(user, demo_dataset, model="fake/rules")
    theirs = forecast_services.forecast(other, demo_dataset, config, measure=False)
    assert theirs["sizes"]["judge"]["completion"] == 150.0


def test_an_lm_judge_on_another_model_is_sized_by_its_runs_on_that_model(
    user, demo_dataset, no_broker
):
    # The program runs on fake/rules, its judge on fake/fewshot: the judge's tokens are kept
    # in the judge model's pace (the forecast reads them there), not the program model's.
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules", judge_size=(150.0, 90.0))
    stored_pace("fake/fewshot", judge_size=(150.0, 90.0))
    config = run_config(
        model="fake/rules", reward="LMAsJudge", reward_language_model="fake/fewshot", epochs=1
    )
    run = runs.launch(user, program, demo_dataset, config)
    assert execution.execute(run.pk, 1) == Run.SUCCEEDED
    judged = ModelPace.objects.get(model="fake/fewshot").sizes
    key = calibration.judge_data_key(program.pk, demo_dataset.pk)
    assert judged["judge"] == judged[key] == {"prompt": 10.0, "completion": 5.0}
    assert "judge" not in ModelPace.objects.get(model="fake/rules").sizes
    after = forecast_services.forecast(program, demo_dataset, config, measure=False)
    assert after["sizes"]["judge"] == {"prompt": 10.0, "completion": 5.0, "fresh": None}
    assert any("as this program's runs on this data measured" in n for n in after["assumptions"])
    # a run launched before the forecast kept each role's pace key: its configuration's
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
    stored_pace("fake/rules", judge_size=(150.0, 90.0))
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
        keys = {calibration.judge_data_key(p.pk, demo_dataset.pk): p for p in programs}
        return {keys[k] for k in sizes if k in keys}

    for program in (programs[1], programs[2], programs[0], programs[3]):
        learn_for(program)
    # 0 (the run itself), 1, 2, then 0 again and 3: 1 and 2 are the oldest
    assert kept() == {programs[0], programs[3]}


def test_tokens_count_the_examples_a_candidate_carries(user, demo_dataset):
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_pace("local/smollm2")
    result = forecast_services.forecast(
        program, demo_dataset, run_config(model="local/smollm2"), measure=False
    )
    seed = result["sizes"]["prediction_seed"]
    candidates = result["sizes"]["prediction_candidates"]
    assert candidates["prompt"] > seed["prompt"] + 20  # 1–3 examples of the demo's rows
    assert seed["fresh"] < seed["prompt"]  # the shared system prompt is evaluated once


def test_other_runs_on_the_cores_and_a_queue_lengthen_the_forecast(
    client_user, user, demo_dataset, settings
):
    settings.TRAINBOARD_WORKER_CONCURRENCY = 1
    program = make_program(user, demo_dataset, model="local/smollm2")
    stored_pace("local/smollm2")
    alone = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "no other run on the cores" in alone and "starting in" not in alone
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
    settings.TRAINBOARD_WORKER_CONCURRENCY = 2  # now both run at once, on the same cores
    shared = forecast_html(client_user, program, demo_dataset, epochs="1")
    assert "the cores shared with 1 other run(s)" in shared and "starting in" not in shared
    assert seconds_in(shared) > 1.5 * seconds_in(alone)


def test_the_forecast_answers_at_once_while_the_broker_hangs(
    client_user, user, demo_dataset, monkeypatch
):
    # The form waited on a busy worker; now nothing in the request waits on one.
    started = threading.Event()
    asked = []

    def hang(*args, **options):
        asked.append(args)
        started.set()
        time.sleep(3)  # a broker that hangs: the behaviour the forecast must not wait on

    monkeypatch.setattr(calibration.calibrate_model, "apply_async", hang)
    program = make_program(user, demo_dataset, model="fake/fewshot")
    forecast_html(client_user, program, demo_dataset)  # this process's first page: templates
    assert started.wait(2)  # the calibration was asked for, off the request
    calibration._requested.clear()  # and is asked for again by the next one
    began = time.perf_counter()
    html = forecast_html(client_user, program, demo_dataset, optimizer="OMEGA")
    assert time.perf_counter() - began < 1.0
    assert 'data-state="measuring"' in html and calls_in(html) > 0
    until(lambda: len(asked) == 2, 5, "asked again, while the first ask still hangs")


def test_the_answer_echoes_the_forms_revision(client_user, program, demo_dataset):
    html = forecast_html(client_user, program, demo_dataset, forecast_revision="17")
    assert 'id="forecast-answer" data-revision="17"' in html
    odd = forecast_html(client_user, program, demo_dataset, forecast_revision="1<b>")
    assert 'data-revision=""' in odd  # only digits are echoed
    problem = forecast_html(client_user, program, demo_dataset, epochs="0", forecast_revision="18")
    assert 'data-revision="18"' in problem


def test_an_unreachable_model_is_said_in_words_not_numbers(client_user, user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/unreachable")
    calibration.calibrate_model("fake/unreachable")
    html = forecast_html(client_user, program, demo_dataset)
    assert "Tokens, cost and time unknown: the model cannot be reached" in html
    assert re.search(r"Forecast:</strong> about \d+ calls</p>", html)  # calls only


def test_the_form_forecast_follows_the_epochs(client_user, program, demo_dataset):
    stored_pace(program.model)
    one = forecast_html(client_user, program, demo_dataset, epochs="1")
    three = forecast_html(client_user, program, demo_dataset, epochs="3")
    assert calls_in(three) > calls_in(one)
    assert seconds_in(three) > seconds_in(one)
    assert "Measuring" not in three


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
    stored_pace(program.model)
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(
            reverse("training:run-create"),
            launch_data(program, demo_dataset, budget_calls="50", budget_minutes="2.5"),
        )
    run = Run.objects.get(owner=user)
    assert run.config["budget_calls"] == 50 and run.config["budget_minutes"] == 2.5
    assert run.config["budget_cost"] is None
    assert run.forecast["state"] == "ready" and run.forecast["calls"]["expected"] > 0
    assert run.forecast["share"] == 1.0 and run.forecast["batch_size"] == 8
    page = client_user.get(run.get_absolute_url()).content.decode()
    assert "Forecast at launch" in page and "Cap on LM calls" in page


def test_a_finished_run_lands_within_the_forecast_it_stored_at_launch(
    user, demo_dataset, no_broker
):
    program = make_program(user, demo_dataset, model="fake/rules")
    stored_pace("fake/rules")
    config = run_config(
        optimizer="OMEGA", model="fake/rules", omega_embedding_model="fake/minilm", epochs=2
    )
    run = runs.launch(user, program, demo_dataset, config)
    stored = Run.objects.get(pk=run.pk).forecast
    assert stored["state"] == "ready" and stored["seconds"]["low"] > 0
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
    stored_pace(program.model)
    shown = shown_value(forecast_html(client_user, program, demo_dataset))
    ModelPace.objects.all().delete()  # the pace moves on after the form answered
    data = {**launch_data(program, demo_dataset), "forecast_shown": shown}
    with django_capture_on_commit_callbacks(execute=True):
        client_user.post(reverse("training:run-create"), data)
    run = Run.objects.get(owner=user)
    carried = signing.loads(shown, salt="trainboard.forecast-shown")["forecast"]
    assert run.forecast == carried and run.forecast["state"] == "ready"


def test_a_forecast_shown_for_other_values_or_tampered_with_is_made_anew(
    client_user, user, program, demo_dataset, no_broker, django_capture_on_commit_callbacks
):
    stored_pace(program.model)
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
