"""Managing runs and programs in Chromium: delete a run, after
which its dataset can be deleted; tag, filter and archive from the runs list's bulk bar;
promote a finished run to a program version, diff it against version 1 and launch a run
from it. Runs use the scripted ``fake/fewshot`` model (it answers its few-shot examples'
majority label, so a trained version scores before any training of its own).

Set ``TRAINBOARD_SHOTS`` to a folder to keep screenshots of each page at 1280 and 390 px.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers_runs import (
    create_program,
    demo_program,
    fill_fields,
    launch_from_form,
    launch_run,
    open_advanced,
    run_field,
    shell,
)

from tests.support.waiting import until

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
#: One epoch over the whole train split, tested once after: seconds on ``fake/fewshot``.
ONE_EPOCH = dict(epochs=1, batch_size=36, evaluations_before=0, evaluations_after=1)


def wait_status(live_stack, run_id: int, status: str = "succeeded", timeout: float = 120) -> None:
    until(
        lambda: run_field(live_stack, run_id, "status") == status,
        timeout,
        f"run {run_id} is {status}",
        poll=0.5,
    )


def copy_of_demo(live_stack, name: str) -> int:
    """A dataset of its own (the demo's rows) that a test may delete."""
    code = f"""
from datasets.models import Dataset, DatasetRow
demo = Dataset.objects.get(owner__username='tester', builtin_key='demo')
copy = Dataset.objects.create(owner=demo.owner, name={name!r}, original_name='copy.jsonl',
    format='jsonl', input_fields=demo.input_fields, target_fields=demo.target_fields,
    row_count=demo.row_count, train_count=demo.train_count, test_count=demo.test_count)
DatasetRow.objects.bulk_create([DatasetRow(dataset=copy, index=r.index, split=r.split, data=r.data) for r in demo.rows.all()])
print(copy.pk)
"""
    return int(shell(live_stack, code))


def fits(page, width: int) -> None:
    """The page has no horizontal scroll at ``width`` (and a screenshot when asked)."""
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert inner == width and scroll <= inner, f"{page.url} is {scroll} px wide at {width} px"


def shoot(page, name: str) -> None:
    """Check the page at both widths; save screenshots under $TRAINBOARD_SHOTS if set."""
    folder = os.environ.get("TRAINBOARD_SHOTS")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("document.fonts.ready.then(() => true)")
        fits(page, width)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{folder}/{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_delete_a_run_then_its_dataset(logged_in_page, live_stack):
    page = logged_in_page
    page.on("dialog", lambda dialog: dialog.accept())  # the dataset form's confirm()
    dataset = copy_of_demo(live_stack, "manage: deletable copy")
    program = create_program(live_stack, "Deletable router", "fake/fewshot", dataset)
    run = launch_run(live_stack, program, dataset, **ONE_EPOCH)
    wait_status(live_stack, run)

    # While the run exists the dataset cannot go, and the page says why.
    page.goto(f"/datasets/{dataset}/")
    page.click("button.ds-danger")
    page.wait_for_url(f"**/datasets/{dataset}/")
    assert f"1 run uses it (#{run} succeeded). Delete those runs first." in (
        page.locator(".messages").inner_text()
    )

    # Delete the run: the confirm page says what goes, then the runs list says it went.
    page.goto(f"/runs/{run}/")
    page.click("#delete-run")
    page.wait_for_url(f"**/runs/{run}/delete/")
    contents = page.locator("#delete-contents").inner_text()
    assert re.search(r"\d+ epoch logs, \d+ candidates, 1 evaluations, \d+ LM call traces", contents)
    page.click("#confirm-delete-button")
    page.wait_for_url("**/runs/")
    assert "and everything it produced" in page.locator(".messages").inner_text()
    assert page.locator(f'#run-list tr[data-run="{run}"]').count() == 0
    assert run_field(live_stack, run, "status") is None

    # Now the dataset can go, and the program (no run uses it any more).
    page.goto(f"/datasets/{dataset}/")
    page.click("button.ds-danger")
    page.wait_for_url("**/datasets/")
    assert "Deleted “manage: deletable copy”." in page.locator(".messages").inner_text()
    page.goto(f"/programs/{program}/")
    page.click("#delete-program")
    page.click("#confirm-delete-button")
    page.wait_for_url("**/programs/")
    assert "Deleted program “Deletable router”" in page.locator(".messages").inner_text()


def test_tag_filter_and_archive_from_the_bulk_bar(logged_in_page, live_stack):
    page = logged_in_page
    dataset, program = demo_program(live_stack, "Bulk router", "fake/fewshot")
    runs = [launch_run(live_stack, program, dataset, **ONE_EPOCH) for _ in range(2)]
    for run in runs:
        wait_status(live_stack, run)
    page.goto(f"/runs/?program={program}")
    for run in runs:
        page.check(f'#run-list tr[data-run="{run}"] input[name=runs]')
    page.fill("#bulk-tag", "sweep-a")
    with page.expect_navigation():
        page.click("#bulk-tag-button")
    assert "Tagged 2 runs." in page.locator(".messages").inner_text()
    page.select_option("#tag-filter", "sweep-a")
    with page.expect_navigation():
        page.click("#run-filters button[type=submit]")
    assert sorted(
        int(row.get_attribute("data-run")) for row in page.locator("#run-list tbody tr").all()
    ) == sorted(runs)
    shoot(page, "run-list")

    # Rename one on its page; archive the other from the bar: it leaves the list.
    page.goto(f"/runs/{runs[0]}/")
    page.click("#run-details-edit summary")
    page.fill("#run-name", "baseline sweep")
    page.fill("#run-notes", "seed 7, <b>not bold</b>")
    with page.expect_navigation():
        page.click("#save-details")
    assert page.locator("h1 .run-title-name").inner_text() == "baseline sweep"
    assert page.locator("#run-notes-text").inner_text() == "seed 7, <b>not bold</b>"
    assert page.locator("#run-notes-text b").count() == 0
    shoot(page, "run-page")
    page.goto(f"/runs/?program={program}")
    page.check(f'#run-list tr[data-run="{runs[1]}"] input[name=runs]')
    with page.expect_navigation():
        page.click("#bulk-archive")
    assert "Archived 1 run." in page.locator(".messages").inner_text()
    assert page.locator("#run-list tbody tr").count() == 1
    assert "baseline sweep" in page.locator(f'#run-list tr[data-run="{runs[0]}"]').inner_text()
    page.check("#show-archived")
    with page.expect_navigation():
        page.click("#run-filters button[type=submit]")
    assert page.locator(f'#run-list tr[data-run="{runs[1]}"] .tag-archived').count() == 1


def test_promote_a_finished_run_diff_and_launch_from_the_new_version(logged_in_page, live_stack):
    page = logged_in_page
    dataset, program = demo_program(live_stack, "Promoted router", "fake/fewshot")
    # 18 validation rows: enough for the examples' gain to be told from noise (the run keeps
    # its seed, with nothing to promote, when it cannot be)
    config = dict(
        epochs=2,
        batch_size=9,
        evaluations_before=1,
        evaluations_after=1,
        validation_split=0.5,
        seed=3,
        rfs_nb_min_examples=2,
    )
    run = launch_run(live_stack, program, dataset, **config)
    page.goto(f"/runs/{run}/")
    # The button arrives with the live update that finishes the run.
    page.locator("#promote-run").click(timeout=120_000)
    page.wait_for_url(re.compile(rf"/programs/{program}/\?version=2$"))
    assert "Variables of version 2" in page.locator("h2", has_text="Variables").inner_text()
    row = page.locator('#version-list tr[data-version="2"]')
    examples = int(row.locator(".version-examples").inner_text().split()[0])
    assert examples > 0
    final = run_field(live_stack, run, "final_reward")
    assert row.locator(".version-reward").inner_text().endswith(f"→ {final:.3f}")
    assert page.locator('#version-list tr[data-version="1"] .version-examples').inner_text() == (
        "0 examples"
    )
    shoot(page, "program-versions")

    page.click("#diff-versions")
    page.wait_for_url(re.compile(rf"/programs/{program}/versions/diff/\?a=1&b=2$"))
    assert page.locator(".version-diff .diff-add").count() >= examples
    shoot(page, "version-diff")

    # Launch from version 2: the form carries it, the run trains it.
    page.goto(f"/programs/{program}/")
    page.locator('#version-list tr[data-version="2"] a.launch-version').click()
    page.wait_for_url(re.compile(rf"/runs/new/\?program={program}&version=2$"))
    assert page.locator("#id_version").input_value() == "2"
    open_advanced(page)
    fill_fields(page, epochs=1, batch_size=36, evaluations_before=1, evaluations_after=1)
    second = launch_from_form(page)
    assert "Trains version 2 of Promoted router" in page.locator(".run-version-line").inner_text()
    wait_status(live_stack, second)
    # Its test reward before any training of its own is the promoted version's.
    assert run_field(live_stack, second, "baseline_reward") == final
