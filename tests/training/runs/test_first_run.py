"""A newcomer is led: the home page's first run is the demo's quick try in one
click, timed by the forecast (never a sentence written once), and the launch form opens with
the only or newest program chosen."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.training.conftest import make_program
from training.execution.pace import measured
from training.execution.run_config import presets
from training.forecasting.measured import Observation
from training.models import ModelPace, Run
from training.programs.demo import ensure_demo_program
from training.runs import quick_try

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_the_home_page_leads_a_newcomer_to_one_click_and_what_to_look_at(
    client_user, user, no_broker
):
    demo = ensure_demo_program(user, model="fake/fewshot")
    make_program(user, demo.dataset, name="Another router")  # newer, but the demo leads
    html = client_user.get(reverse("training:home")).content.decode()
    assert 'id="first-run"' in html
    assert reverse("training:quick-try", args=[demo.pk]) in html
    for section in ("Overview", "Examples", "Candidates and evolution"):
        assert f"<em>{section}</em>" in html
    assert "minute or two" not in html
    response = client_user.post(reverse("training:quick-try", args=[demo.pk]))
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert no_broker == [[run.pk, 1]]
    quick = presets(label_task=True)["quick"]["values"]  # the demo answers a label set
    assert run.program_id == demo.pk and run.dataset_id == demo.dataset_id
    assert run.config["optimizer"]["name"] == quick["optimizer"] == "CalibratedLabels"
    assert run.config["epochs"] == quick["epochs"] == 1
    assert run.config["optimizer"]["params"]["vote"] is True
    Run.objects.filter(pk=run.pk).update(status=Run.SUCCEEDED)
    html = client_user.get(reverse("training:home")).content.decode()
    assert 'id="first-run"' not in html  # led once: a succeeded run of theirs ends it


def test_the_quick_try_time_is_the_forecast_of_the_launch_form(client_user, user):
    demo = ensure_demo_program(user, model="fake/fewshot")
    url = reverse("training:quick-try-forecast", args=[demo.pk])
    first = client_user.get(url).content.decode()
    # no run of the model yet: calls and tokens, the time after a first run, nothing polled
    assert 'data-state="untimed"' in first and "hx-get" not in first
    assert re.search(
        r"Forecast: about \d+ calls, \d+ (k )?tokens, \$0\.00, "
        r"time known after a first run on this model",
        first,
    )
    seen = Observation(seconds={"prediction": 0.05}, tokens={"prediction": 200.0})
    ModelPace.objects.create(
        model=demo.model, sizes={measured.OBSERVED_KEY: [seen.to_dict()]}
    )  # what a first run leaves
    shown = client_user.get(url).content.decode()
    time = re.search(r'<strong class="quick-try-time">([^<]+)</strong>', shown).group(1)
    # the launch form opened on the quick preset forecasts the same run, the same time
    form_page = client_user.get(
        reverse("training:run-create"), {"program": demo.pk, "preset": "quick"}
    ).content.decode()
    assert chosen(form_page, "program") == [str(demo.pk)]
    form = quick_try.quick_form(user, demo)
    assert form.is_valid(), form.errors
    query = {k: v for k, v in form.data.lists()}
    figures = client_user.get(reverse("training:run-forecast"), query).content.decode()
    assert f", {time}</p>" in figures
    assert re.fullmatch(r"\d+–\d+ (s|min)", time)


def chosen(html: str, field: str) -> list[str]:
    """The selected option values of the launch form's ``field`` select."""
    select = re.search(rf'<select name="{field}".*?</select>', html, re.S).group(0)
    return re.findall(r'<option value="(\d+)" selected>', select)


def test_the_launch_form_chooses_the_only_or_newest_program(client_user, user, demo_dataset):
    first = make_program(user, demo_dataset, name="First")
    html = client_user.get(reverse("training:run-create")).content.decode()
    assert chosen(html, "program") == [str(first.pk)]
    assert chosen(html, "dataset") == [str(demo_dataset.pk)]
    newest = make_program(user, demo_dataset, name="Newest")
    html = client_user.get(reverse("training:run-create")).content.decode()
    assert chosen(html, "program") == [str(newest.pk)]
