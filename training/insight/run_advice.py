"""A run that says what happened: its outcome in plain words, and the next steps that apply.

Why: a finished run's figures (a before → after, "0 of 8 candidates beat the seed", intervals)
leave a new user to work out whether training helped and what to change. The run's outcome
(``Run.outcome``: improved, no better than the seed, changed within noise, worse) decides the
sentence, with the evidence behind it: the test split's paired interval, the best candidate's
gain on validation and how large a gain those rows could tell (``detectable_gain``). The steps
that apply come from what the run knows (its dataset's rows and targets, its program's label
fields, its optimizer's card, what OMEGA refused), each a link that opens the launch form (or
the program form, for a label set) with the change already made (``training.runs.prefill``).

Rules, one named function a step, most useful first (``_steps``): declare the label set;
decide the labels from their scores (the registry's optimizer for label tasks); add rows;
a larger test split; a larger validation split; a stronger optimizer model; train longer.

The run page shows what happened with the run's status (``what_happened``) and the steps
below its candidates (``next_steps``).

Example:

    advice = run_advice(run)      # None, or {"outcome", "sentence", "evidence", "steps"}
    advice["steps"][0]            # {"key", "title", "detail", "links": [{"label", "url"}]}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.urls import reverse

from training import optimizer_registry
from training.engine.optimizers import label_balance
from training.engine.optimizers.card import ONCE
from training.engine.utils.paired_bootstrap import detectable_gain, rows_to_detect
from training.execution import forecast, summaries
from training.execution import refusals as run_refusals
from training.execution.run_config import TRAINING
from training.models import Run
from training.programs.programs import ProgramError, answers_labels, program_from_json
from training.runs.prefill import launch_url

#: Training rows read to tell whether a target looks like a label set (a sample is enough).
TARGET_ROWS = 2_000
#: The epochs a "train longer" link proposes: this many times the run's (within the bound).
LONGER_FACTOR = 2
#: The gain the rows a step asks for should be able to tell from noise.
WANTED_GAIN = 0.10
#: A target field looks like a label set with at most this many distinct values, each at
#: most LABEL_CHARS long, and some value repeating.
MAX_LABELS = 12
LABEL_CHARS = 40


def label_like(values: Sequence[Any]) -> list[str] | None:
    """The sorted distinct values of a target field when they look like a label set (few,
    short strings, some repeating), else None."""
    if not values or not all(isinstance(v, str) for v in values):
        return None
    distinct = sorted(set(values))
    if len(distinct) > MAX_LABELS or len(distinct) >= len(values):
        return None
    if any(len(v) > LABEL_CHARS or not v.strip() for v in distinct):
        return None
    return distinct


def beat_seed_totals(run: Run) -> tuple[int, int]:
    """(candidates scored, how many beat the seed), summed over the run's variables."""
    entries = _selections(run)
    candidates = sum(int(entry.get("candidates") or 0) for entry in entries)
    beat = sum(int(entry.get("beat_seed") or 0) for entry in entries)
    return candidates, beat


def _selections(run: Run) -> list[dict[str, Any]]:
    return [entry for entry in (run.selection or {}).values() if isinstance(entry, dict)]


def run_advice(run: Run) -> dict[str, Any] | None:
    """What the run came to and what to try next; None until it finished with an outcome."""
    if run.status != Run.SUCCEEDED or not run.outcome:
        return None
    facts = _Facts(run)
    return {**_what_happened(facts), "steps": _steps(facts)}


def what_happened(run: Run) -> dict[str, Any] | None:
    """The outcome in a sentence and the evidence behind it (None before there is one)."""
    if run.status != Run.SUCCEEDED or not run.outcome:
        return None
    return _what_happened(_Facts(run))


def next_steps(run: Run) -> list[dict[str, Any]]:
    """The steps that apply to a finished run ([] before it has an outcome)."""
    if run.status != Run.SUCCEEDED or not run.outcome:
        return []
    return _steps(_Facts(run))


def _what_happened(facts: _Facts) -> dict[str, Any]:
    return {
        "outcome": facts.run.outcome,
        "sentence": _sentence(facts),
        "evidence": _evidence(facts),
    }


class _Facts:
    """What the advice reads of a finished run, each read once."""

    def __init__(self, run: Run):
        self.run = run
        self.train_rows = int(run.dataset.train_count)
        self.test_rows = int(run.dataset.test_count)
        self.test = summaries.paired_test_difference(run.evaluations.all())
        self.candidates, self.beat = beat_seed_totals(run)
        gains = [e["best_gain"] for e in _selections(run) if isinstance(e.get("best_gain"), dict)]
        self.gain = max(gains, key=lambda g: g["difference"], default=None)
        # the rows the best candidate was judged on, as its evidence line says; what the
        # configuration judges on before any was (CalibratedLabels cross-fits its calibrated
        # candidates on every training row, but a model that scores no labels gets a pool
        # candidate, judged on the validation split)
        judged = (self.gain or {}).get("n")
        self.scoring_rows = (
            int(judged) if judged else forecast.judged_rows(self.train_rows, run.config)
        )
        self.card = (
            optimizer_registry.card(run.optimizer_name)
            if optimizer_registry.offered(run.optimizer_name)
            else None
        )
        program = _program(run)
        self.label_fields = _label_fields(program)
        # what the label optimizers decide: a generator whose output is one label field
        self.answers_labels = program is not None and answers_labels(program)
        self.undeclared = {
            name: labels
            for name, values in _targets(run).items()
            if name not in self.label_fields and (labels := label_like(values)) is not None
        }
        self.refused = sum(run_refusals.counts(run.refusals).values())


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _sentence(facts: _Facts) -> str:
    run, test = facts.run, facts.test
    if run.outcome == Run.IMPROVED:
        return (
            f"Training helped: the trained program scored {_num(run.baseline_reward)} → "
            f"{_num(run.final_reward)} on the {facts.test_rows} test rows, a gain beyond noise."
        )
    if run.outcome == Run.NO_BETTER:
        if not facts.candidates:
            return (
                "No candidate was scored, so the run kept its starting program: its test "
                "reward is unchanged."
            )
        which = (
            "Its one candidate did not score"
            if facts.candidates == 1
            else f"None of the {facts.candidates} candidates scored"
        )
        return (
            f"{which} better than the starting program beyond noise, so the run kept it: its "
            "test reward is unchanged."
        )
    if run.outcome == Run.WORSE:
        return (
            "The trained program beat the starting one on validation but scored lower on the "
            f"test split ({_num(run.baseline_reward)} → {_num(run.final_reward)}, beyond "
            "noise): the validation rows did not stand for the test rows. Keep the starting "
            "program (it is not replaced unless you save this one)."
        )
    smallest = detectable_gain(facts.test_rows)
    change = "" if test is None else f" ({test['difference']:+.3f})"
    return (
        f"The trained program changed{change}, but {facts.test_rows} test rows cannot tell "
        f"a difference smaller than about ±{smallest or 0:.2f} from noise."
    )


def _evidence(facts: _Facts) -> list[str]:
    """The figures behind the sentence, each with its interval."""
    found = []
    if facts.test is not None:
        found.append(
            f"Test: {facts.test['difference']:+.3f} (95% interval {facts.test['low']:+.3f} to "
            f"{facts.test['high']:+.3f}, {facts.test['n']} rows)."
        )
    gain = facts.gain
    if gain is not None:
        smallest = detectable_gain(gain["n"])
        # without a validation split, candidates are judged on the rows they trained on
        rows = "held-out" if (facts.run.config or {}).get("validation_split") else "training"
        found.append(
            f"Best candidate: {gain['difference']:+.3f} over the starting program on the "
            f"{gain['n']} {rows} rows it was judged on (95% interval {gain['low']:+.3f} to "
            f"{gain['high']:+.3f}; those rows tell gains above about {smallest or 0:.2f})."
        )
    return found


# -- the next steps ---------------------------------------------------------------------------


def _steps(facts: _Facts) -> list[dict[str, Any]]:
    if facts.run.outcome == Run.IMPROVED:
        return []
    found = [
        *_label_sets(facts),
        _decide_labels(facts),
        _more_rows(facts),
        _larger_test(facts),
        _larger_validation(facts),
        _stronger_model(facts),
        _more_epochs(facts),
    ]
    return [step for step in found if step is not None]


def _base(run: Run) -> dict[str, Any]:
    """What every launch link keeps of the run: its program (version), dataset and loop."""
    config = run.config or {}
    return {
        "program": run.program_id,
        "version": run.program_version.number if run.program_version_id else None,
        "dataset": run.dataset_id,
        "reward": (config.get("reward") or {}).get("name"),
        "optimizer": run.optimizer_name,
        "epochs": config.get("epochs"),
        "batch_size": config.get("batch_size"),
        "validation_split": config.get("validation_split"),
    }


def _step(key: str, title: str, detail: str, links: list[dict[str, str]]) -> dict[str, Any]:
    return {"key": key, "title": title, "detail": detail, "links": links}


def _dataset_link(run: Run, label: str) -> dict[str, str]:
    return {"label": label, "url": reverse("datasets:detail", args=[run.dataset_id])}


def _label_sets(facts: _Facts) -> list[dict[str, Any]]:
    run = facts.run
    return [
        _step(
            "label_set",
            f"Declare `{name}` a label set",
            f"Its targets take {len(labels)} values ({', '.join(labels[:6])}"
            f"{', ...' if len(labels) > 6 else ''}). As a label set every label is scored and "
            "the model can only answer one of them; a small model gains the most from this.",
            [
                {
                    "label": f"New program with `{name}` as a label set",
                    "url": f"{reverse('training:program-create')}?dataset={run.dataset_id}",
                },
                _dataset_link(run, "Declare it on the dataset's page"),
            ],
        )
        for name, labels in facts.undeclared.items()
    ]


def _decide_labels(facts: _Facts) -> dict[str, Any] | None:
    if not facts.answers_labels or (facts.card is not None and facts.card.label_tasks):
        return None
    name = optimizer_registry.recommended(label_task=True)
    card = optimizer_registry.card(name)
    values = {**_base(facts.run), "optimizer": name, "epochs": card.epochs}
    return _step(
        "decide_labels",
        f"Decide the labels from their scores ({name})",
        "It scores every label and learns, from the training rows, a bias per label and how "
        "much the nearest training examples' labels count: on label tasks it does better "
        "than examples or rewritten instructions in the prompt of a small model.",
        [{"label": f"Launch with {name}", "url": launch_url(**values)}],
    )


def _more_rows(facts: _Facts) -> dict[str, Any] | None:
    if facts.run.outcome not in (Run.NO_BETTER, Run.WITHIN_NOISE):
        return None
    needed = rows_to_detect(WANTED_GAIN)
    if facts.scoring_rows >= needed:
        return None
    smallest = detectable_gain(facts.scoring_rows) or 1.0
    return _step(
        "more_rows",
        "Add labelled rows",
        f"A candidate is kept only when it beats the starting program beyond noise; on "
        f"{facts.scoring_rows} validation rows that takes a gain of about {smallest:.2f}. "
        f"About {needed} rows tell a gain of {WANTED_GAIN:.2f}.",
        [_dataset_link(facts.run, "Add rows to the dataset")],
    )


def _larger_test(facts: _Facts) -> dict[str, Any] | None:
    needed = rows_to_detect(WANTED_GAIN)
    if facts.run.outcome != Run.WITHIN_NOISE or facts.test_rows >= needed:
        return None
    total = facts.train_rows + facts.test_rows
    share = min(0.5, needed / max(total, 1))
    return _step(
        "larger_test",
        "Give the test split more rows",
        f"{facts.test_rows} test rows tell differences above about "
        f"{detectable_gain(facts.test_rows) or 1.0:.2f}; {needed} rows tell {WANTED_GAIN:.2f}. "
        f"Import the data again with a test share of {share:.0%} (the split step says what "
        "each share can tell).",
        [_dataset_link(facts.run, "Open the dataset")],
    )


def _larger_validation(facts: _Facts) -> dict[str, Any] | None:
    run = facts.run
    if run.outcome != Run.NO_BETTER or facts.gain is None or facts.gain["difference"] <= 0:
        return None
    needed = rows_to_detect(max(facts.gain["difference"], WANTED_GAIN))
    if facts.scoring_rows >= needed or facts.train_rows < 2 * needed:
        return None
    split = math.ceil(100 * needed / max(facts.train_rows, 1)) / 100
    split = min(split, TRAINING["validation_split"].max)
    return _step(
        "larger_validation",
        "Score candidates on more rows",
        f"The best candidate gained {facts.gain['difference']:+.3f}, within noise on "
        f"{facts.gain['n']} rows; with a validation split of {split:.2f} a gain like it "
        "can be told apart.",
        [
            {
                "label": f"Launch with validation_split {split:.2f}",
                "url": launch_url(**{**_base(run), "validation_split": split}),
            }
        ],
    )


def _stronger_model(facts: _Facts) -> dict[str, Any] | None:
    run = facts.run
    name = run.optimizer_name
    if not optimizer_registry.offered(name):
        return None
    if "language_model" not in optimizer_registry.get(name).PARAMETERS:
        return None
    field = optimizer_registry.field_name(name, "language_model")
    detail = (
        f"{facts.refused} rewrite(s) were refused as junk (empty, repeated, invented labels). "
        if facts.refused
        else ""
    )
    return _step(
        "stronger_model",
        f"Give {name} a stronger language_model",
        detail + "Its rewrites are only as good as the model that writes them; a larger "
        "model than the program's writes instructions worth keeping.",
        [
            {
                "label": f"Launch {name} with a stronger language_model",
                "url": launch_url(**_base(run)) + f"#field-{field}",
            }
        ],
    )


def _more_epochs(facts: _Facts) -> dict[str, Any] | None:
    run = facts.run
    if run.outcome != Run.NO_BETTER or facts.card is None or facts.card.proposes == ONCE:
        return None  # a value built once from the data: more epochs propose the same
    epochs = min(run.epochs * LONGER_FACTOR, TRAINING["epochs"].max)
    if epochs <= run.epochs:
        return None
    return _step(
        "more_epochs",
        "Train longer",
        f"{run.epochs} epoch{'s' if run.epochs != 1 else ''} gave the optimizer few "
        "candidates to try; more epochs try more.",
        [
            {
                "label": f"Launch with {epochs} epochs",
                "url": launch_url(**{**_base(run), "epochs": epochs}),
            }
        ],
    )


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


def _program(run: Run) -> Any:
    """The engine program the run launched with (None when it cannot be read here)."""
    try:
        return program_from_json(run.launch_json)
    except ProgramError:
        return None


def _label_fields(program: Any) -> dict[str, list[str]]:
    """{output field: its labels} ``program`` declares (``Literal`` outputs)."""
    found: dict[str, list[str]] = {}
    for module in getattr(program, "modules", None) or []:
        found.update(label_balance.label_fields(getattr(module, "output_data_model", None)))
    return found


def refusal_rows(run: Run) -> list[dict[str, Any]]:
    """The leaderboard's "refused: why" rows (``training.execution.refusals.rows``)."""
    return run_refusals.rows(run.refusals)
