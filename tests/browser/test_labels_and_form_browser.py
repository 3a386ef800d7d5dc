"""Label sets, the self-explaining launch form and the program/upload pages, in the browser:
presets fill the form (button and ?preset=), the browser's max is the server's limit and the
server says the same number, a label-set program on the local model answers only valid labels
(slow), and the changed pages fit 1280 and 390 px (kept as screenshots when
``TRAINBOARD_SCREENSHOT_DIR`` is set)."""

from __future__ import annotations

import json

import pytest
from helpers_runs import (
    create_program,
    demo_dataset_id,
    fill_fields,
    launch_from_form,
    screenshot,
    shell,
    tiny_dataset_id,
)
from playwright.sync_api import expect

from training.execution.run_config import TRAINING, presets

pytestmark = pytest.mark.browser


def _tweeteval_id(live_stack) -> int:
    code = (
        "from django.contrib.auth import get_user_model\n"
        "from datasets.services import import_builtin\n"
        "print(import_builtin(get_user_model().objects.get(username='tester'), "
        "'tweeteval_sentiment').pk)"
    )
    return int(shell(live_stack, code))


def test_presets_fill_the_launch_form(logged_in_page, live_stack):
    page = logged_in_page
    program_id = create_program(live_stack, "Presets", "fake/fewshot", demo_dataset_id(live_stack))
    page.goto(f"/runs/new/?program={program_id}")
    expect(page.locator("#advanced-settings")).not_to_have_attribute("open", "")
    shown = presets(label_task=False)  # the demo's free-text target, no label set
    for key in ("thorough", "quick"):
        page.click(f"#preset-{key}")
        values = shown[key]["values"]
        expect(page.locator("#id_epochs")).to_have_value(str(values["epochs"]))
        expect(page.locator("#id_evaluations_after")).to_have_value(
            str(values["evaluations_after"])
        )
        expect(page.locator("#id_optimizer")).to_have_value(values["optimizer"])
        expect(page.locator(f"#preset-{key}")).to_have_attribute("aria-pressed", "true")
    # the same preset as a GET parameter (the link without JS)
    page.goto(f"/runs/new/?program={program_id}&preset=thorough")
    expect(page.locator("#id_epochs")).to_have_value(str(shown["thorough"]["values"]["epochs"]))
    expect(page.locator("#id_rfs_few_shot_learning")).to_be_checked()
    expect(page.locator("#id_rfs_few_shot_learning")).to_be_disabled()


def test_browser_and_server_name_the_same_validation_limit(logged_in_page, live_stack):
    page = logged_in_page
    program_id = create_program(live_stack, "Limit", "fake/fewshot", demo_dataset_id(live_stack))
    page.goto(f"/runs/new/?program={program_id}")
    top = TRAINING["validation_split"].max
    assert float(page.get_attribute("#id_validation_split", "max")) == top
    above = round(top + 0.01, 2)
    page.fill("#id_validation_split", str(above))
    assert page.locator("#id_validation_split").evaluate("e => e.checkValidity()") is False
    page.evaluate("document.getElementById('run-form').noValidate = true")  # what a script sends
    page.click("#launch")
    error = page.locator("#field-validation_split .errorlist")
    expect(error).to_contain_text(f"between 0 and {top:g}")
    expect(error).to_contain_text(f"got {above:g}")


def _fits_both_widths(page, name: str) -> None:
    """The page is no wider than the window at 1280 and at 390 px."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(page, f"{name}-{width}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, (name, width, overflow)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_the_changed_pages_fit_both_widths(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id = _tweeteval_id(live_stack)
    page.goto(f"/datasets/{dataset_id}/")
    expect(page.locator("#labels-label")).to_contain_text("label set (proposed)")
    _fits_both_widths(page, "dataset-labels")
    page.click("#new-program")
    expect(page.locator("#id_use_label_set")).to_be_checked()
    page.fill("#id_name", "Tweet sentiment")
    page.fill("#id_max_tokens", "16")
    page.click("#program-form button[type=submit]")
    page.wait_for_url("**/programs/*/")
    expect(page.locator("#program-fields")).to_contain_text("label set: negative, neutral")
    expect(page.locator("#program-settings")).to_contain_text("Max tokens")
    _fits_both_widths(page, "program")
    page.click("#launch-run")
    page.click("#preset-quick")
    _fits_both_widths(page, "launch-basic")
    page.evaluate("document.getElementById('advanced-settings').open = true")
    _fits_both_widths(page, "launch-advanced")
    page.goto("/datasets/upload/")
    page.keyboard.press("Tab")
    for _ in range(30):  # the hidden file input is reachable by keyboard
        if page.evaluate("document.activeElement.id") == "id_file":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "id_file"
    assert page.locator("input[type=file]").count() == 1
    _fits_both_widths(page, "upload")


@pytest.mark.slow
def test_label_set_program_answers_only_valid_labels_on_the_local_model(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id = tiny_dataset_id(live_stack)
    page.goto(f"/datasets/{dataset_id}/")
    if page.locator("#declare-team").count():
        page.click("#declare-team")
        expect(page.locator("#labels-team")).to_contain_text("label set")
    labels = json.loads(
        shell(
            live_stack,
            "import json; from datasets.labels import label_sets; "
            f"from datasets.models import Dataset; print(json.dumps(label_sets(Dataset.objects.get(pk={dataset_id}))['team']))",
        )
    )
    page.click("#new-program")
    fill_fields(
        page, name="Local labels", instructions="Answer with the team code name.", max_tokens=16
    )
    page.click("#program-form button[type=submit]")
    page.wait_for_url("**/programs/*/")
    page.click("#launch-run")
    fill_fields(page, epochs=1, batch_size=4, validation_split=0)
    run_id = launch_from_form(page)
    badge = page.locator('#run-status .status-badge[data-status="succeeded"]')
    badge.wait_for(timeout=300_000)
    answers = json.loads(
        shell(
            live_stack,
            "import json; from training.models import LMCallTrace as T; "
            f"print(json.dumps([json.loads(t.parsed)['team'] for t in T.objects.filter(run_id={run_id}, role='prediction') if t.parsed]))",
        )
    )
    assert answers and set(answers) <= set(labels), (answers, labels)
