"""Helpers (no tests) for the runs browser tests and bench/stream_latency.py: live stack
seeding, the launch form, and page checks (screenshots, fitting the window's width)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path


def shell(live_stack, code: str) -> str:
    """Run Python against the live database (as ``manage.py shell -c`` would, in the
    session's one Django process: ``LiveStack.shell``); returns the last line it printed."""
    out = live_stack.shell(code).strip().splitlines()
    return out[-1] if out else ""


def demo_dataset_id(live_stack) -> int:
    return int(
        shell(
            live_stack,
            "from datasets.models import Dataset as D;print(D.objects.get(owner__username='tester', builtin_key='demo').pk)",
        )
    )


def tiny_dataset_id(live_stack, train: int = 4, test: int = 2) -> int:
    """A 'tiny routing' dataset (rows of the demo dataset) so the local model finishes fast;
    one per size (named after it): the session's live stack is shared by every test."""
    code = f"""
from datasets.models import Dataset, DatasetRow
demo = Dataset.objects.get(owner__username='tester', builtin_key='demo')
tiny, created = Dataset.objects.get_or_create(owner=demo.owner, name='tiny routing {train}+{test}', defaults=dict(
    original_name='tiny.jsonl', format='jsonl', input_fields=demo.input_fields, target_fields=demo.target_fields,
    row_count={train + test}, train_count={train}, test_count={test}))
if created:
    train_rows = list(demo.rows.filter(split='train').order_by('index')[:{train}])
    test_rows = list(demo.rows.filter(split='test').order_by('index')[:{test}])
    for i, row in enumerate(train_rows + test_rows):
        DatasetRow.objects.create(dataset=tiny, index=i, split=row.split, data=row.data)
print(tiny.pk)
"""
    return int(shell(live_stack, code))


def demo_copy_id(live_stack, name: str) -> int:
    """A dataset ``name`` with every row of the demo dataset, for a test that publishes a new
    version: versions of one dataset share its line, so publishing on the demo itself would
    change the dataset every later test of the session's live stack launches on."""
    code = f"""
from datasets.models import Dataset, DatasetRow
demo = Dataset.objects.get(owner__username='tester', builtin_key='demo')
copy, created = Dataset.objects.get_or_create(owner=demo.owner, name={name!r}, defaults=dict(
    original_name=demo.original_name, format=demo.format, input_fields=demo.input_fields,
    target_fields=demo.target_fields, row_count=demo.row_count, train_count=demo.train_count,
    test_count=demo.test_count))
if created:
    for row in demo.rows.order_by('index'):
        DatasetRow.objects.create(dataset=copy, index=row.index, split=row.split, data=row.data)
print(copy.pk)
"""
    return int(shell(live_stack, code))


def create_program(live_stack, name: str, model: str, dataset_id: int, max_tokens=None) -> int:
    code = f"""
from django.contrib.auth import get_user_model
from datasets.models import Dataset
from training.models import Program
from training.programs.programs import build_engine_program
user = get_user_model().objects.get(username='tester')
dataset = Dataset.objects.get(pk={dataset_id})
engine = build_engine_program(name={name!r}, input_fields=dataset.input_schema_fields(), target_fields=dataset.target_schema_fields(), module='Generator', instructions='Route it.', model={model!r}, max_tokens={max_tokens!r})
program = Program.objects.create(owner=user, name={name!r}, dataset=dataset, module='Generator', instructions='Route it.', model={model!r}, engine_json=engine.get_config())
print(program.pk)
"""
    return int(shell(live_stack, code))


def demo_program(live_stack, name: str, model: str) -> tuple[int, int]:
    """Create a program ``name`` on ``model`` over the demo dataset (what most tests train);
    returns (dataset id, program id)."""
    dataset_id = demo_dataset_id(live_stack)
    return dataset_id, create_program(live_stack, name, model, dataset_id)


def launch_run(live_stack, program_id: int, dataset_id: int, **config) -> int:
    """Create a run through the same services as the launch form, enqueued to the worker."""
    code = f"""
from django.contrib.auth import get_user_model
from datasets.models import Dataset
from training.models import Program
from training.programs import programs as ps
from training.runs import launch as runs
from training.execution.run_config import validate_run_config
user = get_user_model().objects.get(username='tester')
program = Program.objects.get(pk={program_id}); dataset = Dataset.objects.get(pk={dataset_id})
engine = ps.program_from_json(program.engine_json)
config = validate_run_config({json.dumps(config)}, ps.output_field_names(engine), dataset.target_names, program.model)
print(runs.launch(user, program, dataset, config).pk)
"""
    return int(shell(live_stack, code))


#: A run on a fake LM that is still going whenever a test acts on it (as many epochs as a run
#: may have: the engine's prediction memo makes repeated epochs of a fake take milliseconds).
ENDLESS = {"epochs": 1000, "batch_size": 9, "evaluations_before": 0, "evaluations_after": 0}


def launch_demo_run(live_stack, name: str, model: str, *, evaluations=(0, 0), **config) -> int:
    """Create a program ``name`` on ``model`` over the demo dataset and launch it with
    ``config``; ``evaluations`` = (test evaluations before, after), none unless asked."""
    dataset_id, program_id = demo_program(live_stack, name, model)
    before, after = evaluations
    config.setdefault("evaluations_before", before)
    config.setdefault("evaluations_after", after)
    return launch_run(live_stack, program_id, dataset_id, **config)


#: One epoch with a test evaluation before and after: a finished run with every panel (errors,
#: per-example table, matrices) filled, in seconds on a fake LM.
SMALL_RUN = {"epochs": 1, "batch_size": 12, "evaluations_before": 1, "evaluations_after": 1}


def finished_small_run(page, live_stack, name: str, model: str) -> int:
    """Launch a SMALL_RUN of a new program ``name`` on ``model`` over the demo dataset, wait on
    its page until it succeeded, then reload it: the panels drawn with the page (errors, the
    per-example table), not streamed, are there only after a reload."""
    dataset_id, program_id = demo_program(live_stack, name, model)
    run_id = launch_run(live_stack, program_id, dataset_id, **SMALL_RUN)
    page.goto(f"/runs/{run_id}/")
    page.locator('#run-status .status-badge[data-status="succeeded"]').wait_for(timeout=60_000)
    reload_run_page(page)
    return run_id


#: Counts, from each document's start, the socket messages htmx's ws extension has swapped in.
COUNT_SWAPPED_MESSAGES = """
if (!window.__tbSwappedHooked) {
  window.__tbSwappedHooked = true;
  window.__tbSwapped = 0;
  document.addEventListener('htmx:wsAfterMessage', () => window.__tbSwapped++);
}
"""


def reload_run_page(page) -> None:
    """Reload a run page and wait until its socket's first message is swapped in: that
    snapshot replaces every live section, so a click sent before it may land on an element
    being replaced and do nothing."""
    page.add_init_script(COUNT_SWAPPED_MESSAGES)
    page.reload()
    page.wait_for_function("() => window.__tbSwapped > 0")


#: An OMEGA fit of a ``fake/rules`` program that a real worker finishes in seconds: its
#: mutations learn rules from wrong answers, ``fake/embedding`` gives DNS its vectors
#: (tests/support/fake_models.py).
QUICK_OMEGA = {
    "optimizer": "OMEGA",
    "omega_embedding_model": "fake/embedding",
    "omega_population_size": 4,
    "batch_size": 8,
    "validation_split": 0.5,  # 18 rows: enough for its rules to beat the seed beyond noise
    "seed": 7,
}


def open_rules_omega_run(page, live_stack, name: str, latency: float, **config) -> int:
    """Launch a QUICK_OMEGA run of a new program ``name`` on ``fake/rules`` (``latency`` s a
    call) over the demo dataset and open its page while it runs; ``config`` adds to the
    settings (``evaluations`` as in launch_demo_run)."""
    model = f"fake/rules?latency={latency}"
    run_id = launch_demo_run(live_stack, name, model, **{**QUICK_OMEGA, **config})
    page.goto(f"/runs/{run_id}/")
    return run_id


def open_launch_form(page, live_stack, name: str, model: str, optimizer: str) -> int:
    """Create a program ``name`` on ``model`` over the demo dataset and open its launch form in
    ``page`` with that dataset and ``optimizer`` chosen; returns the dataset id."""
    dataset_id, program_id = demo_program(live_stack, name, model)
    page.goto(f"/runs/new/?program={program_id}")
    page.select_option("#id_dataset", str(dataset_id))
    page.select_option("#id_optimizer", optimizer)
    return dataset_id


def run_field(live_stack, run_id: int, field: str):
    return json.loads(
        shell(
            live_stack,
            f"import json;from training.models import Run;print(json.dumps(Run.objects.filter(pk={run_id}).values_list({field!r}, flat=True).first(), default=str))",
        )
    )


def open_advanced(page) -> None:
    """Unfold the launch form's "Advanced settings" (seed, evaluations, optimizer details)."""
    page.evaluate("document.getElementById('advanced-settings').open = true")


def fill_fields(page, **values) -> None:
    """Type each of ``values`` into the form's field of that name (``#id_<name>``), in order,
    as a person would: one call instead of a line per field."""
    for name, value in values.items():
        page.fill(f"#id_{name}", str(value))


def launch_from_form(page) -> int:
    """Press the launch form's Launch and wait for the new run's page; returns its id."""
    page.click("#launch")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return int(page.url.rstrip("/").split("/")[-1])


def screenshot(page, name: str, full_page: bool = True) -> None:
    """Save the page (whole, or the window) as ``<name>.png`` under
    $TRAINBOARD_SCREENSHOT_DIR, when it is set: screenshots are for a person to look at, not
    checked, and a full-page PNG of a long page costs the browser a second of CPU."""
    folder = os.environ.get("TRAINBOARD_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


def fits_the_width(page) -> bool:
    """The page's content (below the site's top bar) ends within the window: wide tables
    scroll inside their box instead of widening the page."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('.content > *'))"
        ".every(e => e.getBoundingClientRect().right <= window.innerWidth + 1)"
    )


def unfold(page, *folds: str) -> None:
    """Open the run page's folded sections ``folds`` (their ``data-fold`` names: selection,
    population, lineage, spend) by their summary, as a reader would; trainboard.js keeps each
    open across reloads for the rest of the page's browser context."""
    for name in folds:
        fold = page.locator(f'details[data-fold="{name}"]')
        if not fold.evaluate("d => d.open"):
            fold.locator(":scope > summary").click()
        page.wait_for_function(
            "(n) => document.querySelector(`details[data-fold='${n}']`).open", arg=name
        )


def scroll_to(page, selector: str) -> None:
    """Scroll ``selector`` into view in one step of the page's own script: a run page's live
    snapshot may swap the element between Playwright finding it and scrolling it ("not
    attached to the DOM"), never inside one script call."""
    page.locator(selector).evaluate("e => e.scrollIntoView({block: 'center'})")
