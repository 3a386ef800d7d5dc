"""The first hour at phone width, in Chromium: at 390 px the top bar is two rows of 44 px
touch targets (the account's, then every section's link on screen); the upload preview's
rows and the stored rows fit their box with no word split over two lines, and the new
dataset's settings are full-width 44 px controls; the programs (home page and list) and the
datasets list show each name and model whole, their actions on screen; the upload's label-set
control, the runs' test before → after and change (and the list's sort links), and the home
page's recent runs are on screen without sideways scrolling, and the ✓/✗ correction buttons are
44 px touch targets; the sample answers to correct read as cards, compare's setting names wrap
between their words, and a file input's button is a 44 px target; at 1280 px the same pages
keep their tables' columns. The run page explains its terms
where they appear, and its advanced sections are folded until opened, then stay as left across
a reload.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the pages at 1280 and 390 px."""

from __future__ import annotations

import json

import pytest
from helpers_runs import QUICK_OMEGA, SMALL_RUN, reload_run_page, screenshot, shell, unfold

pytestmark = pytest.mark.browser

PASSWORD = "a-phone-reader-password-1"

#: A user of their own, the demo program, and a small run and an OMEGA run of it (fake
#: models: seconds each); prints the runs' ids.
READER = """
import json
from django.contrib.auth import get_user_model
from training.execution.run_config import validate_run_config
from training.programs import programs as ps
from training.programs.demo import ensure_demo_program
from training.runs import launch as runs
user = get_user_model().objects.create_user({name!r}, password={password!r})
program = ensure_demo_program(user, model="fake/fewshot")
engine = ps.program_from_json(program.engine_json)
ids = []
for config in {configs!r}:
    config = validate_run_config(config, ps.output_field_names(engine), program.dataset.target_names, program.model)
    ids.append(runs.launch(user, program, program.dataset, config).pk)
print(json.dumps(ids))
"""

#: A file whose ``team`` column is offered as a label set (two values); its messages are long
#: enough to squeeze the label's column on a phone.
CSV = "message,team\n" + "".join(
    f'"refund number {i} please, my invoice is wrong again",billing\napp crash number {i},tech\n'
    for i in range(6)
)

#: The columns each table shows at 1280 px.
RUN_LIST_COLUMNS = ["Select", "Run", "Start", "Status", "Program", "Dataset", "Optimizer"]
RUN_LIST_COLUMNS += ["Model", "Best val./train", "Test before → after", "Test Δ", "LM calls"]
RUN_LIST_COLUMNS += ["Duration"]
HOME_COLUMNS = ["Run", "Status", "Program", "Optimizer", "Test reward before → after", "Started"]
MAPPING_COLUMNS = ["Column", "Inferred", "Role", "Field name", "Type", "Description"]


@pytest.fixture(scope="module")
def reader(live_stack):
    """A new user with a finished small run and a finished OMEGA run."""
    omega = {**QUICK_OMEGA, "evaluations_before": 1, "evaluations_after": 1}
    code = READER.format(name="phone-reader", password=PASSWORD, configs=[SMALL_RUN, omega])
    small, omega_run = json.loads(shell(live_stack, code))
    return {"username": "phone-reader", "small": small, "omega": omega_run}


def log_in(page, reader) -> list[str]:
    """Log ``reader`` in; returns the list the page's console errors are collected in."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/accounts/login/")
    page.fill("#id_username", reader["username"])
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return errors


def finished(page, run_id: int) -> None:
    """Open the run's page and wait for its live status to say it succeeded, then reload (and
    wait for the socket's snapshot): the per-example table comes with the page."""
    page.goto(f"/runs/{run_id}/")
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=90_000)
    reload_run_page(page)


def upload_mapping(page) -> None:
    """Drop CSV on the upload page and go on to its column mapping."""
    page.goto("/datasets/upload/")
    page.evaluate(
        """([name, text]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], name, {type: "text/csv"}));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
        }""",
        ["tickets.csv", CSV],
    )
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")
    page.locator("#mapped-rows").wait_for()


#: The words of the cells matching the selector that are split over two lines (a short word
#: broken letter by letter in a squeezed column), as "cell: word".
SPLIT_WORDS = """(selector) => {
  const split = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const tops = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
        if (tops.size > 1) split.push(`${cell.textContent.trim().slice(0, 30)}: ${word[0]}`);
      }
    }
  }
  return split;
}"""


#: The line breaks inside a word of the cells matching the selector: a break that follows
#: neither a space nor one of a setting name's own marks (``_``, ``.``, ``/``), as "cell: a|b".
BREAKS_INSIDE_A_WORD = """(selector) => {
  const bad = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let lastTop = null, lastChar = "";
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.data.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        const top = Math.round(rect.top), char = node.data[i];
        if (lastTop !== null && top > lastTop && !/[\\s_./]/.test(lastChar) && !/\\s/.test(char)) {
          bad.push(`${cell.textContent.trim()}: ${lastChar}|${char}`);
        }
        lastTop = top;
        lastChar = char;
      }
    }
  }
  return bad;
}"""


def within(box, width: int) -> bool:
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


def header(page, selector: str) -> list[str]:
    return [text.strip().rstrip(" ▲▼") for text in page.locator(selector).all_inner_texts()]


def touch_targets_on_screen(page, selector: str, width: int) -> None:
    """Every element matching ``selector`` is wholly on screen and at least 44 px tall."""
    targets = page.locator(selector)
    assert targets.count() > 0, selector
    for target in targets.all():
        box = target.bounding_box()
        assert within(box, width) and box["height"] >= 44, (selector, box)


def test_key_columns_and_touch_targets_at_390_px_and_the_tables_at_1280(browser_page, reader):
    page = browser_page
    errors = log_in(page, reader)
    finished(page, reader["small"])
    finished(page, reader["omega"])

    page.set_viewport_size({"width": 390, "height": 900})
    page.goto("/programs/")
    # the top bar: two rows (brand, workers and account; then the sections), every link on it
    # a 44 px target on screen
    assert page.locator("header.topbar").bounding_box()["height"] <= 2 * 50
    touch_targets_on_screen(page, "nav.mainnav a", 390)
    touch_targets_on_screen(page, ".topbar .brand, .topbar-right button", 390)
    # the programs list: each name and model whole, its actions on screen
    assert page.evaluate(SPLIT_WORDS, "#program-list td") == []
    assert within(page.locator("#program-list td.program-name").first.bounding_box(), 390)
    touch_targets_on_screen(page, "#program-list td.row-actions a", 390)
    screenshot(page, "programs-390")
    page.goto("/datasets/")
    assert page.evaluate(SPLIT_WORDS, "#dataset-list td") == []
    assert within(page.locator("#dataset-list td.key").first.bounding_box(), 390)
    screenshot(page, "datasets-390")

    upload_mapping(page)
    # the file's first rows and the stored rows: no word split over two lines, the stored rows
    # (their columns' roles and types too) fit their box without sideways scrolling
    assert page.evaluate(SPLIT_WORDS, "#preview-rows td, #mapped-rows td, #mapped-rows th") == []
    stored = page.locator("#mapped-rows")
    assert stored.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth")
    assert within(stored.bounding_box(), 390)
    settings = ".ds-settings input:not([type=checkbox]), .ds-settings textarea"
    touch_targets_on_screen(page, settings, 390)
    label_set = page.locator('select[name="col-1-type"]')  # the team column's type
    assert "label set" in label_set.locator("option").all_inner_texts()[-1]
    label_set.scroll_into_view_if_needed()
    assert within(label_set.bounding_box(), 390), label_set.bounding_box()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "upload-mapping-390")

    page.goto("/runs/")
    rows = page.locator("#run-list tbody tr")
    assert rows.count() == 2
    for row in rows.all():
        for cell in ("td.test-before-after", "td.test-change-cell", "td.run-id"):
            box = row.locator(cell).bounding_box()
            assert within(box, 390), (cell, box)
        checkbox = row.locator("td.run-select label").bounding_box()
        assert checkbox["width"] >= 44 and checkbox["height"] >= 44
    assert "→" in rows.first.locator("td.test-before-after").inner_text()
    sort = page.locator("#run-list thead th a").first  # its sort links stay, in a row above
    assert within(sort.bounding_box(), 390) and sort.bounding_box()["height"] >= 44
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "runs-390")

    page.goto("/")
    for cell in page.locator("#home-run-list td.test-before-after").all():
        assert within(cell.bounding_box(), 390), cell.bounding_box()
    assert page.evaluate(SPLIT_WORDS, "#home-program-list td") == []
    touch_targets_on_screen(page, "#home-program-list .quick-try", 390)
    screenshot(page, "home-390")

    page.goto(f"/runs/{reader['small']}/")
    marks = page.locator("#eval-rows .mark-right-button, #eval-rows .mark-wrong-button")
    assert marks.count() >= 2
    for button in marks.all()[:6]:
        box = button.bounding_box()
        assert box["width"] >= 44 and box["height"] >= 44, box
    # the sample answers to correct read as cards: a sample's row, input, prediction and
    # correction on screen, its buttons 44 px targets, the table no wider than its box
    sample = page.locator("#correction-samples tbody tr").first
    sample.wait_for()
    sample.scroll_into_view_if_needed()
    for cell in ("td.correction-row", "td.correction-input", "td.prediction", "td.correction-cell"):
        box = sample.locator(cell).bounding_box()
        assert within(box, 390), (cell, box)
    samples = page.locator("#correction-samples")
    assert samples.evaluate("t => t.scrollWidth <= t.parentElement.clientWidth")
    touch_targets_on_screen(page, "#correction-samples tbody tr:first-child button", 390)
    screenshot(page, "run-390")

    # compare's settings: each name on screen in its sticky column, wrapped between its words
    page.goto(f"/compare/?runs={reader['small']}&runs={reader['omega']}")
    assert page.evaluate(BREAKS_INSIDE_A_WORD, "#compare-config td:first-child") == []
    assert within(page.locator("#compare-config td:first-child").first.bounding_box(), 390)
    screenshot(page, "compare-390")

    # the program import's file button is a 44 px target
    page.goto("/programs/")
    choose = page.locator("#import-form input[type=file]")
    height = choose.evaluate(
        "i => parseFloat(getComputedStyle(i, '::file-selector-button').minHeight)"
    )
    assert height >= 44

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/runs/")
    assert header(page, "#run-list thead th") == RUN_LIST_COLUMNS
    for cell in ("td.test-before-after", "td.test-change-cell", "td.best-reward"):
        box = page.locator(f"#run-list tbody tr >> nth=0 >> {cell}").bounding_box()
        assert within(box, 1280), (cell, box)
    tops = (
        page.locator("#run-list tbody tr")
        .first.locator("td")
        .evaluate_all("(cells) => cells.map((c) => Math.round(c.getBoundingClientRect().top))")
    )
    assert len(set(tops)) == 1  # one table row, not a card
    screenshot(page, "runs-1280")
    page.goto("/")
    assert header(page, "#home-run-list thead th") == HOME_COLUMNS
    screenshot(page, "home-1280")
    upload_mapping(page)
    assert header(page, ".ds-mapping thead th") == MAPPING_COLUMNS
    screenshot(page, "upload-mapping-1280")
    page.goto(f"/runs/{reader['small']}/")
    box = page.locator("#eval-rows .mark-right-button").first.bounding_box()
    assert box["height"] < 44  # the desktop table keeps its compact marks
    screenshot(page, "run-1280")
    assert errors == []


def test_the_run_page_explains_its_terms_and_keeps_its_folds(browser_page, reader):
    page = browser_page
    errors = log_in(page, reader)
    finished(page, reader["omega"])
    # the summary at the top is never folded
    assert page.locator("#run-status").is_visible()
    assert page.locator("details #run-status").count() == 0
    folds = page.locator("details[data-fold]")
    assert sorted(f.get_attribute("data-fold") for f in folds.all()) == [
        "lineage",
        "population",
        "selection",
        "spend",
    ]
    for fold in folds.all():  # folded by default, its summary says what is inside
        assert fold.evaluate("d => !d.open")
        assert fold.locator(":scope > summary").is_visible()

    # each term is explained where it appears: a title on hover, a plain line under it
    unfold(page, "selection", "population")
    help_text = page.locator("#selection-help").inner_text()
    help_text += " " + page.locator("#population-help").inner_text()
    for term in ("Non-dominated", "Within noise", "95% interval", "DNS novelty", "PC1 / PC2"):
        assert term in help_text, term
    page.locator("#confidence-table").wait_for()
    front = page.locator("#confidence-table thead abbr", has_text="Front")
    assert "no other candidate" in front.get_attribute("title")
    assert page.locator("#population-section abbr", has_text="DNS").get_attribute("title")
    axis = page.locator("#population-svg text.map-axis")
    axis.wait_for(state="attached")
    assert axis.text_content().startswith("PC1") and "share" in axis.locator("title").text_content()

    # opened, a fold stays open across a reload; closed again, it stays closed
    reload_run_page(page)  # the socket's snapshot swapped in: the map is drawn once more
    page.wait_for_function("() => document.querySelector(`details[data-fold='population']`).open")
    assert page.locator('details[data-fold="selection"]').evaluate("d => d.open")
    assert page.locator('details[data-fold="lineage"]').evaluate("d => !d.open")
    point = page.locator("#population-svg circle.map-point").first
    point.wait_for()  # drawn, at the size it has open
    assert point.bounding_box()["width"] > 0
    screenshot(page, "run-folds-open-1280")
    page.locator('details[data-fold="population"] > summary').click()
    page.wait_for_function("() => localStorage.getItem('trainboard:fold:population') === 'closed'")
    reload_run_page(page)
    assert page.locator('details[data-fold="population"]').evaluate("d => !d.open")
    assert page.locator('details[data-fold="selection"]').evaluate("d => d.open")
    page.set_viewport_size({"width": 390, "height": 900})
    summary = page.locator('details[data-fold="lineage"] > summary').bounding_box()
    assert summary["height"] >= 44 and within(summary, 390)
    screenshot(page, "run-folds-390")
    assert errors == []
