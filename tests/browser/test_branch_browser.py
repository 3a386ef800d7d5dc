"""Steering in the browser: branch from a candidate with an edited instruction and a
pinned example; mark three predictions, publish them as a new dataset version, and train on
it with "judge by people". Fast: the scripted ``fake/fewshot`` model of tests/support.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep screenshots (branch form, runs tree, corrections
panel, dataset versions) at 1280 and 390 px.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers_runs import (
    create_program,
    demo_copy_id,
    demo_dataset_id,
    fill_fields,
    launch_from_form,
    launch_run,
    open_advanced,
    shell,
    tiny_dataset_id,
)

pytestmark = pytest.mark.browser

WIDTHS = (1280, 390)
RUN = {
    "reward": "ExactMatch",
    "optimizer": "RandomFewShot",
    "rfs_nb_min_examples": 2,
    "rfs_nb_max_examples": 3,
    "rfs_nb_candidates": 2,
    "epochs": 1,
    "batch_size": 8,
    "validation_split": 0.5,  # 18 rows: its examples beat the seed beyond noise
    "seed": 11,
    "evaluations_before": 1,
    "evaluations_after": 1,
}


def screenshots(page, name: str) -> None:
    """The current page at both widths (when TRAINBOARD_SCREENSHOT_DIR is set), and at each
    width the page is no wider than the window."""
    folder = os.environ.get("TRAINBOARD_SCREENSHOT_DIR")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{name} is {scroll} px wide at {width} px"
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def wait_status(page, status: str = "succeeded", timeout: float = 90_000) -> None:
    page.locator(f'#run-status .status-badge[data-status="{status}"]').wait_for(timeout=timeout)


def query(live_stack, code: str):
    return json.loads(shell(live_stack, code))


def finished_run(page, live_stack, name: str, own_dataset: bool = False) -> tuple[int, int, int]:
    """A finished fake-model run of a new program ``name`` on the demo dataset (on a copy of
    it, ``own_dataset``, for a test that publishes a version of it)."""
    dataset_id = demo_copy_id(live_stack, name) if own_dataset else demo_dataset_id(live_stack)
    program_id = create_program(live_stack, name, "fake/fewshot", dataset_id)
    run_id = launch_run(live_stack, program_id, dataset_id, **RUN)
    page.goto(f"/runs/{run_id}/")
    wait_status(page)
    return dataset_id, program_id, run_id


def test_branch_from_a_candidate_with_an_edited_instruction_and_a_pinned_example(
    logged_in_page, live_stack
):
    page = logged_in_page
    _, _, run_id = finished_run(page, live_stack, "Branch source")
    source = query(
        live_stack,
        "import json;from training.models import Candidate as C;"
        f"c=[c for c in C.objects.filter(run_id={run_id}).order_by('id') "
        "if len(c.value.get('examples') or [])>=2][0];"
        "print(json.dumps({'pk':c.pk,'examples':c.value['examples']}))",
    )
    page.goto(f"/runs/{run_id}/candidates/{source['pk']}/")
    page.click("#branch-candidate")
    page.wait_for_url(f"**/runs/{run_id}/candidates/{source['pk']}/branch/")
    # Prefilled with the run's settings.
    assert page.input_value("#id_epochs") == "1" and page.input_value("#id_seed") == "11"
    assert page.input_value("#id_rfs_nb_min_examples") == "2"
    page.fill("#id_branch_instructions", "Route it to <b>one</b> team code.")
    page.check("input[name=example_0][value=pin]")
    page.check("input[name=example_1][value=remove]")
    screenshots(page, "branch-form")
    page.click("#launch-branch")
    page.wait_for_url(lambda url: "/branch/" not in url and "/runs/" in url)
    branch_id = int(page.url.rstrip("/").split("/")[-1])
    assert branch_id != run_id
    wait_status(page)
    page.locator("#run-parent").wait_for()
    assert f"run #{run_id}" in page.locator("#run-parent").inner_text()
    # Every candidate of the branch carries the pinned example, first.
    pinned = source["examples"][0]
    branch = query(
        live_stack,
        "import json;from training.models import Run;"
        f"r=Run.objects.get(pk={branch_id});"
        "print(json.dumps({'parent':r.parent_run_id,'candidate':r.parent_candidate_id,"
        "'values':list(r.candidates.values_list('value',flat=True)),"
        "'instructions':r.program.engine_json['variables']['generator/state']['value']['instructions']}))",
    )
    assert (branch["parent"], branch["candidate"]) == (run_id, source["pk"])
    assert branch["instructions"] == "Route it to <b>one</b> team code."
    assert len(branch["values"]) >= 3
    assert all(value["examples"][0] == pinned for value in branch["values"])
    assert any(value["examples"][1:] != source["examples"][2:] for value in branch["values"])
    # The runs list shows the branch under its parent, indented.
    page.goto("/runs/")
    rows = page.locator("#run-list tbody tr")
    ids = [int(value) for value in rows.evaluate_all("rs => rs.map(r => r.dataset.run)")]
    assert ids.index(branch_id) == ids.index(run_id) + 1
    cell = page.locator(f'#run-list tr[data-run="{branch_id}"] td.run-id')
    assert "branch-depth-1" in cell.get_attribute("class")
    assert f"branch of #{run_id}" in cell.inner_text()
    screenshots(page, "runs-tree")
    page.goto(f"/compare/?runs={run_id}&runs={branch_id}")
    assert page.locator(f'#run-tree li[data-run="{branch_id}"][data-parent="{run_id}"]').count()
    screenshots(page, "compare-tree")


def test_mark_three_predictions_publish_a_version_and_train_on_it(logged_in_page, live_stack):
    page = logged_in_page
    dataset_id, program_id, run_id = finished_run(
        page, live_stack, "Corrections source", own_dataset=True
    )
    panel = page.locator("#correction-samples")
    panel.wait_for()
    samples = query(
        live_stack,
        f"import json;from training.models import Run;print(json.dumps(Run.objects.get(pk={run_id}).samples))",
    )
    rows = [
        int(v) for v in panel.locator("tbody tr").evaluate_all("rs => rs.map(r => r.dataset.row)")
    ]
    assert len(rows) == len(samples) == 5
    wrong = [i for i, s in enumerate(samples) if s["predicted"] != s["expected"]]
    right = [i for i, s in enumerate(samples) if s["predicted"] == s["expected"]]
    assert len(wrong) >= 2 and right
    plan = {wrong[0]: "right", right[0]: "wrong", wrong[1]: "answer"}
    for index, kind in plan.items():
        cell = page.locator(f'#correction-samples tr[data-row="{rows[index]}"] .correction')
        if kind == "answer":  # the prediction was the right answer: type it in
            cell.locator("input[name=answer_team]").fill(samples[index]["predicted"]["team"])
            cell.locator("button.answer-button").click()
        else:
            cell.locator(f"button.mark-{kind}-button").click()
        page.locator(
            f'#correction-samples tr[data-row="{rows[index]}"] .correction[data-pending="{kind}"]'
        ).wait_for()
    page.locator('#run-corrections .pending-changes[data-count="3"]').wait_for()
    screenshots(page, "corrections-panel")
    page.click("#run-corrections button.publish-version")
    page.wait_for_url(lambda url: "/datasets/" in url)
    version_id = int(page.url.rstrip("/").split("/")[-1])
    assert version_id != dataset_id
    current = page.locator("#version-list tr.current-version")
    assert current.get_attribute("data-version") == "2"
    assert current.locator(".change-log li").count() == 3
    kinds = current.locator(".change-log li").evaluate_all("ls => ls.map(l => l.dataset.kind)")
    assert sorted(kinds) == ["answer", "right", "wrong"]
    assert current.locator(".change-author").all_inner_texts() == ["tester"] * 3
    screenshots(page, "dataset-versions")
    # The original is unchanged and its run still points at it.
    original = query(
        live_stack,
        "import json;from datasets.models import DatasetRow as R;from training.models import Run;"
        f"print(json.dumps([R.objects.get(dataset_id={dataset_id}, index={rows[wrong[1]]}).data,"
        f"Run.objects.get(pk={run_id}).dataset_id]))",
    )
    assert original == [
        {**samples[wrong[1]]["inputs"], **samples[wrong[1]]["expected"]},
        dataset_id,
    ]
    # A run on the new version, judged by people, launched from the form.
    page.goto(f"/runs/new/?program={program_id}")
    page.select_option("#id_dataset", str(version_id))
    open_advanced(page)
    page.check("#id_reward_human_marks")
    fill_fields(page, rfs_nb_min_examples=2, rfs_nb_candidates=2, epochs=1, batch_size=8)
    fill_fields(page, validation_split=0.5, seed=11, evaluations_before=1, evaluations_after=1)
    new_run = launch_from_form(page)
    wait_status(page)
    rewards = query(
        live_stack,
        "import json;from training.models import Evaluation as E;from datasets.models import DatasetRow as R;"
        f"print(json.dumps([E.objects.get(run_id={run_id},phase='after').example_rewards,"
        f"E.objects.get(run_id={new_run},phase='after').example_rewards,"
        f"list(R.objects.filter(dataset_id={dataset_id},split='test').order_by('index').values_list('index',flat=True))]))",
    )
    before, after, test_rows = rewards
    for index, kind in plan.items():
        position = test_rows.index(rows[index])
        assert before[position] == (1.0 if kind == "wrong" else 0.0)
        assert after[position] == (0.0 if kind == "wrong" else 1.0), kind


HAND_EDIT = (
    "Route the customer's message to a team. Answer with exactly one word: money (billing, "
    "charges, refunds, invoices), bug (something in the app or site is broken) or box "
    "(delivery, parcels, shipping)."
)


@pytest.mark.slow
def test_branch_on_the_local_model_from_a_hand_edited_candidate(logged_in_page, live_stack):
    """The real local model (smollm2) on a tiny dataset: a RandomFewShot run of one epoch,
    then a branch from its best candidate with hand-written instructions and its first
    example pinned. Prints both runs' test rewards, the figure a branch is judged by."""
    page = logged_in_page
    dataset_id = tiny_dataset_id(live_stack, train=8, test=6)
    program_id = create_program(
        live_stack, "Local branch source", "local/smollm2", dataset_id, max_tokens=16
    )
    config = {**RUN, "validation_split": 0.0, "batch_size": 4, "rfs_nb_candidates": 1}
    run_id = launch_run(live_stack, program_id, dataset_id, **config)
    page.goto(f"/runs/{run_id}/")
    wait_status(page, timeout=600_000)
    page.click("#branch-best")
    page.wait_for_url(f"**/runs/{run_id}/branch/")
    page.fill("#id_branch_instructions", HAND_EDIT)
    pin = page.locator("input[name=example_0][value=pin]")
    pinned = pin.count() > 0  # the best candidate may be the seed, which has no examples
    if pinned:
        pin.check()
    page.click("#launch-branch")
    page.wait_for_url(lambda url: "/branch/" not in url and "/runs/" in url)
    branch_id = int(page.url.rstrip("/").split("/")[-1])
    wait_status(page, timeout=600_000)
    figures = query(
        live_stack,
        "import json;from training.models import Run;"
        f"rs=[Run.objects.get(pk={run_id}),Run.objects.get(pk={branch_id})];"
        "print(json.dumps([[r.pk,r.baseline_reward,r.final_reward,r.best_reward,r.lm_calls,"
        "r.parent_run_id,r.program.engine_json['variables']['generator/state']['value']['instructions'],"
        "r.duration.total_seconds()] for r in rs]))",
    )
    parent, branch = figures
    assert branch[5] == run_id and branch[6] == HAND_EDIT
    assert parent[2] is not None and branch[2] is not None
    print(
        f"\nlocal/smollm2, tiny dataset (8 train / 6 test), RandomFewShot, 1 epoch:\n"
        f"  parent run #{parent[0]}: test {parent[1]:.3f} -> {parent[2]:.3f} "
        f"({parent[4]} LM calls, {parent[7]:.0f} s)\n"
        f"  branch run #{branch[0]} (hand-edited instructions, pinned example: "
        f"{pinned}): test {branch[1]:.3f} -> {branch[2]:.3f} "
        f"({branch[4]} LM calls, {branch[7]:.0f} s)\n"
        f"  branch test after - parent test after: {branch[2] - parent[2]:+.3f}"
    )
