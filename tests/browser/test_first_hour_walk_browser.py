"""A new member's first hour, in Chromium: an administrator adds them on the Team page after
the stack started; they go from the home page through uploading a CSV (its label column a
label set), building a program, launching a run from the form, watching it live to its end,
the runs list, a second run and comparing the two, at 1280 px, then the key pages again at
390 px.

For the whole walk: no response is a 4xx/5xx and the console shows no error; at both widths
no page is wider than the window and no table's key cell (``td.key``) is off screen. Each
run's figures on its page (LM calls, candidates, test reward before → after, epochs), live
and reloaded, are the same wherever another page shows them: the runs list (LM calls, test
before → after), compare (LM calls, test before → after, its lineage, the epochs setting),
the home page's recent runs (test before → after) and the run's candidates page (their
count); and the run page names one count of the rows its best candidate was judged on.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep every page of the walk at both widths."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from helpers_runs import fits_the_width, launch_from_form, screenshot

pytestmark = pytest.mark.browser

ADMIN_PASSWORD = "live-test-password-1"  # tests/conftest.py's first user, an administrator
MEMBER = "first-hour"
MEMBER_PASSWORD = "a-first-hour-password-1"
#: Answers the label its message's words name once its prompt holds an example
#: (tests/support/fake_models.py): a run that adds examples beats the seed.
MODEL = "fake/keywords?latency=0.02"

#: Ten support messages per label, each with a word ``fake/keywords`` knows.
MESSAGES = {
    "money": [
        "I was charged twice this month",
        "Where is my refund",
        "The invoice shows the wrong amount",
        "My payment did not go through",
        "Why is there a late fee",
        "The bill is higher than last time",
        "My card was declined at checkout",
        "Please send me a receipt",
        "The price changed after I ordered",
        "Can you refund the second charge",
    ],
    "bug": [
        "The app shows an error on start",
        "I cannot log in since yesterday",
        "The save button does nothing",
        "This page never finishes loading",
        "The app is broken after the update",
        "Everything is very slow today",
        "My notes do not sync anymore",
        "It says login failed every time",
        "The screen goes blank and then a crash",
        "An error pops up when I upload",
    ],
    "box": [
        "My package never arrived",
        "The parcel came damaged",
        "When will you deliver my order",
        "The courier left it at the wrong door",
        "Shipping has taken three weeks",
        "The box was empty when it came",
        "The tracking number does not work",
        "Can the delivery come on Saturday",
        "I need to change the shipping address",
        "The parcel is stuck at the depot",
    ],
}


def support_csv() -> str:
    """30 rows ``text,label``, the labels interleaved (as a file exported from a ticket
    queue would be)."""
    rows = ["text,label"]
    for position in range(10):
        for label, texts in MESSAGES.items():
            rows.append(f"{texts[position]},{label}")
    return "\n".join(rows) + "\n"


@dataclass
class Watch:
    """Every response and console message of the pages it watches, for the whole walk."""

    responses: list[tuple[int, str]] = field(default_factory=list)
    console: list[tuple[str, str, str]] = field(default_factory=list)  # type, text, page url
    page_errors: list[tuple[str, str]] = field(default_factory=list)

    def page(self, page) -> None:
        page.on("response", lambda response: self.responses.append((response.status, response.url)))
        page.on("console", lambda m: self.console.append((m.type, m.text, page.url)))
        page.on("pageerror", lambda exc: self.page_errors.append((str(exc), page.url)))

    def failed(self) -> list[tuple[int, str]]:
        return [(status, url) for status, url in self.responses if status >= 400]

    def errors(self) -> list[tuple[str, str, str]]:
        return [message for message in self.console if message[0] == "error"]


def log_in(page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def add_member_on_the_team_page(browser, live_stack, watch: Watch) -> None:
    """The administrator adds the member on the Team page, in a browser of their own."""
    admin = browser.new_context(base_url=live_stack.url)
    page = admin.new_page()
    watch.page(page)
    log_in(page, live_stack.username, ADMIN_PASSWORD)
    page.click("nav.mainnav >> text=Team")
    page.fill("#id_username", MEMBER)
    page.fill("#id_password1", MEMBER_PASSWORD)
    page.fill("#id_password2", MEMBER_PASSWORD)
    page.click("#member-form button[type=submit]")
    assert f"{MEMBER} can log in now" in page.locator(".messages").inner_text()
    admin.close()


#: Table key cells that are not wholly within the window (or not drawn at all), as
#: "class: text" lines.
KEYS_OFF_SCREEN = """() => Array.from(document.querySelectorAll('td.key, th.key'))
  .filter(e => { const r = e.getBoundingClientRect();
                 return r.width === 0 || r.left < -1 || r.right > window.innerWidth + 1; })
  .map(e => `${e.className}: ${e.textContent.trim().slice(0, 40)}`)"""


def check_page(page, name: str, width: int) -> None:
    """The page fits the window and shows every table key cell; screenshot ``name-width``."""
    assert fits_the_width(page), f"{name} is wider than {width} px"
    assert page.evaluate(KEYS_OFF_SCREEN) == [], f"{name} at {width} px: key cells off screen"
    screenshot(page, f"walk-{name}-{width}")


NUMBER = r"—|-?\d+\.\d+"


def first_number(text: str) -> str:
    """The first figure of a cell ("0.333 (2 identical evaluations)" → "0.333")."""
    return re.match(rf"\s*({NUMBER})", text).group(1)


def before_after(text: str) -> tuple[str, str]:
    """The two figures of "0.333 → 0.667 (+0.333) …" (each may carry "± …" or "(…)")."""
    found = re.search(rf"({NUMBER})[^→]*→\s*({NUMBER})", text)
    assert found, f"no before → after in {text!r}"
    return found.group(1), found.group(2)


def leading_int(text: str) -> int:
    return int(re.match(r"\s*(\d+)", text).group(1))


@dataclass(frozen=True)
class RunFigures:
    """What a run's page shows of it."""

    lm_calls: int
    candidates: int
    test_reward: tuple[str, str]  # before, after, as the page writes them
    epochs_done: int
    epochs: int


def run_page_figures(page) -> RunFigures:
    evaluations = page.locator('#run-evaluations tr[data-metric="reward"] td')
    counted = page.locator("#run-leaderboard > p.muted").inner_text()
    header = page.locator(".page-header > span.muted").inner_text()
    progress = page.locator("#run-progress .bar-label").first.inner_text()  # "Epochs 1 / 1"
    epochs_done, epochs = re.search(r"Epochs (\d+) / (\d+)", progress).groups()
    assert f"· {epochs} epoch" in header, (header, progress)  # the header says the same
    return RunFigures(
        lm_calls=int(page.locator("#usage-calls").inner_text()),
        candidates=int(re.search(r"(\d+) candidates?\b", counted).group(1)),
        test_reward=(
            first_number(evaluations.nth(1).inner_text()),
            first_number(evaluations.nth(2).inner_text()),
        ),
        epochs_done=int(epochs_done),
        epochs=int(epochs),
    )


def check_rows_told(page) -> None:
    """The run page names one count of the rows its best candidate was judged on: its
    evidence line, and the next step "Add labelled rows" when it offers it."""
    evidence = page.locator("#run-happened .run-happened-evidence").inner_text()
    judged = re.search(r"on the (\d+) held-out rows it was judged on", evidence)
    assert judged, evidence
    step = page.locator('#run-next-steps li[data-step="more_rows"]')
    if step.count():
        told = re.search(r"on (\d+) validation rows", step.inner_text())
        assert told and told.group(1) == judged.group(1), (evidence, step.inner_text())


def wait_for_forecast(page) -> None:
    """The launch form's forecast has answered: a time, or none for a model no run has been
    measured on yet (never a problem with the form)."""
    summary = page.locator('#forecast-summary:not([data-state="loading"])')
    summary.wait_for(timeout=30_000)
    assert summary.get_attribute("data-state") in ("timed", "untimed"), summary.inner_text()


def launch_and_watch(page, name: str) -> tuple[int, RunFigures]:
    """Press Launch on the form, follow the run page live (no reload) until the run
    succeeded; returns the run and its figures, checked against the same page reloaded."""
    run_id = launch_from_form(page)
    page.evaluate("window.__sameDocument = true")
    page.locator('#run-epochs tr[data-epoch="0"]').wait_for(timeout=90_000)
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    assert page.evaluate("window.__sameDocument") is True  # it all came live
    check_page(page, f"{name}-live", 1280)
    live = run_page_figures(page)
    page.reload()
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for()
    assert run_page_figures(page) == live, "the live page's figures differ from a reload's"
    check_rows_told(page)
    assert live.lm_calls > 0 and live.candidates > 0 and live.epochs_done == live.epochs
    assert "—" not in live.test_reward  # scored before and after
    return run_id, live


def test_a_new_member_walks_through_the_first_hour(browser, browser_page, live_stack, tmp_path):
    watch = Watch()
    add_member_on_the_team_page(browser, live_stack, watch)
    page = browser_page
    watch.page(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, MEMBER, MEMBER_PASSWORD)

    # Home: the first-run card leads; the member goes their own way, with their own file.
    page.goto("/")
    assert page.locator("#first-run").count() == 1
    check_page(page, "home", 1280)
    page.click("nav.mainnav >> text=Datasets")
    page.click("a:has-text('Upload a file')")
    page.wait_for_url("**/datasets/upload/")
    check_page(page, "upload", 1280)
    data = tmp_path / "support.csv"
    data.write_text(support_csv())
    page.set_input_files("#id_file", str(data))
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")
    assert page.locator("#row-count").inner_text() == "30"
    page.select_option('select[name="col-0-role"]', "input")
    page.select_option('select[name="col-1-role"]', "target")
    page.select_option('select[name="col-1-type"]', "label set")
    page.locator("#mapped-rows").wait_for()
    page.fill('input[name="name"]', "Support tickets")
    check_page(page, "upload-mapping", 1280)
    page.click("#create-dataset")
    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    dataset_url = page.url
    dataset_id = int(dataset_url.rstrip("/").rsplit("/", 1)[-1])
    assert page.locator("#detail-row-count").inner_text() == "30"
    check_page(page, "dataset", 1280)

    # A program on the dataset's fields, answering only its labels.
    page.click("#new-program")
    page.fill("#id_name", "Ticket router")
    page.fill("#id_instructions", "Route the support message to its team.")
    page.fill("#id_model", MODEL)
    assert page.locator("#id_use_label_set").is_checked()
    check_page(page, "program-form", 1280)
    page.click("#program-form button[type=submit]")
    page.wait_for_url(re.compile(r"/programs/\d+/$"))
    program_url = page.url
    program_id = int(program_url.rstrip("/").rsplit("/", 1)[-1])
    check_page(page, "program", 1280)

    # First run: the form's quick preset (a label set: CalibratedLabels, one epoch).
    page.click("#launch-run")
    page.click("#preset-quick")  # fills the form in place
    assert page.locator("#preset-quick").get_attribute("aria-pressed") == "true"
    assert page.locator("#id_optimizer").input_value() == "CalibratedLabels"
    assert page.locator("#id_epochs").input_value() == "1"
    wait_for_forecast(page)
    check_page(page, "launch-form", 1280)
    first, first_figures = launch_and_watch(page, "run-1")

    # The runs list shows the run as its page does.
    page.click("nav.mainnav >> text=Runs")
    page.wait_for_url("**/runs/")
    check_page(page, "runs-1", 1280)

    # Second run: RandomFewShot over two epochs, from the program page.
    page.goto(program_url)
    page.click("#launch-run")
    page.select_option("#id_optimizer", "RandomFewShot")
    page.fill("#id_epochs", "2")
    wait_for_forecast(page)
    second, second_figures = launch_and_watch(page, "run-2")
    figures = {first: first_figures, second: second_figures}

    # Runs list → tick both → compare.
    page.click("nav.mainnav >> text=Runs")
    page.wait_for_url("**/runs/")
    check_page(page, "runs", 1280)
    for run_id, shown in figures.items():
        row = page.locator(f'#run-list tr[data-run="{run_id}"]')
        assert leading_int(row.locator('td[data-figure="lm-calls"]').inner_text()) == (
            shown.lm_calls
        ), f"run #{run_id}: LM calls on the runs list"
        assert before_after(row.locator("td.test-before-after").inner_text()) == (
            shown.test_reward
        ), f"run #{run_id}: test reward before → after on the runs list"
        row.locator("input[name=runs]").check()
    page.click("#compare-selected")
    page.wait_for_url("**/compare/?runs=*")
    page.locator("#compare-history-chart").wait_for()
    check_page(page, "compare", 1280)
    compare_url = page.url
    columns = [
        int(run)
        for run in page.locator("#compare-metrics thead th[data-run]").evaluate_all(
            "cells => cells.map(c => c.dataset.run)"
        )
    ]
    assert sorted(columns) == sorted(figures)
    for column, run_id in enumerate(columns, start=1):
        shown = figures[run_id]
        calls = page.locator(f'#compare-metrics tr[data-figure="lm-calls"] td[data-run="{run_id}"]')
        assert int(calls.inner_text()) == shown.lm_calls, f"run #{run_id}: LM calls on compare"
        reward = page.locator('#compare-metrics tr[data-metric="reward"] td').nth(column)
        assert before_after(reward.inner_text()) == shown.test_reward, (
            f"run #{run_id}: test reward before → after on compare"
        )
        tree = page.locator(f'#run-tree li[data-run="{run_id}"]').inner_text()
        assert before_after(tree) == shown.test_reward, f"run #{run_id}: compare's lineage"
        epochs = page.locator('#compare-config tr[data-setting="epochs"] td').nth(column)
        assert int(epochs.inner_text()) == shown.epochs, f"run #{run_id}: epochs on compare"
    assert page.locator('#compare-config tr[data-setting="epochs"]').get_attribute("class") == (
        "config-differs"
    )

    # Each run's candidates: as many on its candidates page as its page counts.
    for run_id, shown in figures.items():
        page.goto(f"/runs/{run_id}/candidates/")
        heading = page.locator(".page-header > span.muted").inner_text()
        assert leading_int(heading) == shown.candidates, f"run #{run_id}: candidates"

    # Home: the recent runs say the same, and the first-run card is gone (a run succeeded).
    page.goto("/")
    assert page.locator("#first-run").count() == 0
    for run_id, shown in figures.items():
        cell = page.locator(f'#home-run-list tr[data-run="{run_id}"] td.test-before-after')
        assert before_after(cell.inner_text()) == shown.test_reward, f"run #{run_id}: home"

    # The key pages again on a phone.
    page.set_viewport_size({"width": 390, "height": 844})
    pages = {
        "home": "/",
        "upload": "/datasets/upload/",
        "dataset": dataset_url,
        "program-form": f"/programs/new/?dataset={dataset_id}",
        "program": program_url,
        "launch-form": f"/runs/new/?program={program_id}",
        "run-1": f"/runs/{first}/",
        "run-2": f"/runs/{second}/",
        "runs": "/runs/",
        "compare": compare_url,
    }
    page.goto("/datasets/upload/")
    page.set_input_files("#id_file", str(data))
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")
    page.locator("#mapped-rows").wait_for()
    check_page(page, "upload-mapping", 390)
    page.click(".ds-discard button[type=submit]")
    page.wait_for_url("**/datasets/")
    for name, url in pages.items():
        page.goto(url)
        if name.startswith("run-"):
            page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for()
            assert run_page_figures(page) == figures[first if name == "run-1" else second]
        if name == "launch-form":
            wait_for_forecast(page)
        check_page(page, name, 390)
    assert page.locator("#compare-metrics").count() == 1
    page.goto("/runs/")
    assert page.locator("#run-list td.key").count() == 4 * len(figures)  # run, status, test, change

    # The whole walk: every response was answered (the counts say it was recorded), and the
    # console stayed clean.
    assert len(watch.responses) > 50
    assert watch.failed() == [], watch.failed()
    assert watch.errors() == [], watch.errors()
    assert watch.page_errors == [], watch.page_errors
