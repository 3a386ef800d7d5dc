"""A run that says why: when no candidate beat the seed, one sentence and the next steps.

Why: "0 of 8 candidates beat the seed" leaves a new user stuck. The engine's
``utils.next_steps`` decides which changes usually help (a label set, retrieved examples,
more rows, a bigger validation split, a stronger optimizer model); this module gathers what
it needs from a finished run (its selection, dataset, program, refusals, test rewards) and
turns each suggestion into a link that opens the launch form (or the program form, for a
label set) with the change already made (``training.runs.prefill``). Nothing is shown for a
run that is still going, or where some candidate beat the seed.

Example:

    advice = run_advice(run)      # None, or {"sentence": ..., "steps": [...]}
    advice["steps"][0]            # {"key", "title", "detail", "links": [{"label", "url"}]}
"""

from __future__ import annotations

import math
from typing import Any

from django.urls import reverse

from training.engine.forecast import validation_cut
from training.engine.optimizers import label_balance
from training.engine.utils import next_steps as engine_next_steps
from training.execution import refusals as run_refusals
from training.execution.run_config import TRAINING
from training.models import Run
from training.programs.programs import ProgramError, program_from_json
from training.runs.prefill import launch_url

#: Training rows read to tell whether a target looks like a label set (a sample is enough).
TARGET_ROWS = 2_000
#: The epochs a "train longer" link proposes: this many times the run's (within the bound).
LONGER_FACTOR = 2


def beat_seed_totals(run: Run) -> tuple[int, int]:
    """(candidates scored, how many beat the seed), summed over the run's variables."""
    entries = [entry for entry in (run.selection or {}).values() if isinstance(entry, dict)]
    candidates = sum(int(entry.get("candidates") or 0) for entry in entries)
    beat = sum(int(entry.get("beat_seed") or 0) for entry in entries)
    return candidates, beat


def run_advice(run: Run) -> dict[str, Any] | None:
    """The run page's "why it did not learn": None unless the run finished, scored some
    candidates and none beat the seed."""
    if run.status not in (Run.SUCCEEDED, Run.STOPPED):
        return None
    candidates, beat = beat_seed_totals(run)
    if candidates == 0 or beat > 0:
        return None
    train_rows = int(run.dataset.train_count)
    scoring = validation_cut(train_rows, float(run.config.get("validation_split") or 0))
    scoring_rows = train_rows - scoring if scoring < train_rows else train_rows
    suggestions = engine_next_steps.next_steps(
        optimizer=run.optimizer_name,
        train_rows=train_rows,
        candidates=candidates,
        beat_seed=beat,
        scoring_rows=scoring_rows,
        targets=_targets(run),
        label_fields=_label_fields(run),
        refusals=run_refusals.counts(run.refusals),
        before=run.baseline_reward,
        after=run.final_reward,
    )
    steps = []
    for suggestion in suggestions:
        if suggestion.key == "no_candidate_beat_seed":  # the sentence says it: its changes
            steps += _instead_of_no_candidate(run, suggestions)
        else:
            steps.append({**suggestion.to_dict(), "links": _links(run, suggestion, train_rows)})
    return {
        "sentence": (
            f"No candidate beat the starting program: none of the {candidates} scored "
            "better than the seed beyond noise, so the run kept its starting prompt."
        ),
        "steps": steps,
    }


def _targets(run: Run) -> dict[str, list[Any]]:
    """{target field: its values on the first training rows}."""
    names = run.dataset.target_names
    rows = (
        run.dataset.rows.filter(split="train")
        .order_by("index")
        .values_list("data", flat=True)[:TARGET_ROWS]
    )
    values: dict[str, list[Any]] = {name: [] for name in names}
    for data in rows:
        for name in names:
            values[name].append((data or {}).get(name))
    return values


def _label_fields(run: Run) -> dict[str, list[str]]:
    """{output field: its labels} the run's program declares (``Literal`` outputs)."""
    try:
        program = program_from_json(run.launch_json)
    except ProgramError:
        return {}
    found: dict[str, list[str]] = {}
    for module in getattr(program, "modules", None) or []:
        found.update(label_balance.label_fields(getattr(module, "output_data_model", None)))
    return found


def _base(run: Run) -> dict[str, Any]:
    """What every launch link keeps of the run: its program (version), dataset and loop."""
    config = run.config or {}
    return {
        "program": run.program_id,
        "version": run.program_version.number if run.program_version_id else None,
        "dataset": run.dataset_id,
        "reward": (config.get("reward") or {}).get("name"),
        "epochs": config.get("epochs"),
        "batch_size": config.get("batch_size"),
        "validation_split": config.get("validation_split"),
    }


def _links(run: Run, suggestion: Any, train_rows: int) -> list[dict[str, str]]:
    """The links that make ``suggestion``'s change (each ``{"label", "url"}``)."""
    base = _base(run)
    key = suggestion.key
    if key == "label_set":
        field = suggestion.change["label_set"]["field"]
        return [
            {
                "label": f"New program with `{field}` as a label set",
                "url": f"{reverse('training:program-create')}?dataset={run.dataset_id}",
            },
            {
                "label": "Declare it on the dataset's page",
                "url": reverse("datasets:detail", args=[run.dataset_id]),
            },
        ]
    if key == "nearest_few_shot":
        return [
            {
                "label": "Launch with NearestFewShot",
                "url": launch_url(**{**base, "optimizer": "NearestFewShot", "epochs": 1}),
            }
        ]
    if key == "more_rows":
        return [
            {
                "label": "Add rows to the dataset",
                "url": reverse("datasets:detail", args=[run.dataset_id]),
            }
        ]
    if key == "bigger_validation":
        needed = suggestion.change.get("min_scoring_rows", 0)
        split = math.ceil(100 * needed / max(train_rows, 1)) / 100
        split = min(split, TRAINING["validation_split"].max)
        return [
            {
                "label": f"Launch with validation_split {split:.2f}",
                "url": launch_url(
                    **{**base, "optimizer": run.optimizer_name, "validation_split": split}
                ),
            }
        ]
    if key == "junk_rewrites":
        return [_stronger_model(base)]
    return []


def _instead_of_no_candidate(run: Run, suggestions: list[Any]) -> list[dict[str, Any]]:
    """What the engine's "none of N candidates beat the start" leads to, as steps with links
    (the page's sentence already says it): train longer (not for NearestFewShot: it proposes
    one pool, more epochs add nothing) and, for OMEGA, a stronger model for its rewrites
    (unless the junk-rewrites step already offers it)."""
    base = _base(run)
    steps = []
    epochs = min(run.epochs * LONGER_FACTOR, TRAINING["epochs"].max)
    if run.optimizer_name != "NearestFewShot" and epochs > run.epochs:
        steps.append(
            {
                "key": "more_epochs",
                "title": "Train longer",
                "detail": f"{run.epochs} epoch{'s' if run.epochs != 1 else ''} gave the "
                "optimizer few candidates to try; more epochs try more.",
                "links": [
                    {
                        "label": f"Launch with {epochs} epochs",
                        "url": launch_url(
                            **{**base, "optimizer": run.optimizer_name, "epochs": epochs}
                        ),
                    }
                ],
            }
        )
    if run.optimizer_name == "OMEGA" and not any(s.key == "junk_rewrites" for s in suggestions):
        steps.append(
            {
                "key": "stronger_model",
                "title": "Give OMEGA a stronger language_model",
                "detail": "Its rewrites are only as good as the model that writes them; a "
                "larger model than the program's writes instructions worth keeping.",
                "links": [_stronger_model(base)],
            }
        )
    return steps


def _stronger_model(base: dict[str, Any]) -> dict[str, str]:
    return {
        "label": "Launch OMEGA with a stronger language_model",
        "url": launch_url(**{**base, "optimizer": "OMEGA"}) + "#field-omega_language_model",
    }


def refusal_rows(run: Run) -> list[dict[str, Any]]:
    """The leaderboard's "refused: why" rows (``training.execution.refusals.rows``)."""
    return run_refusals.rows(run.refusals)
