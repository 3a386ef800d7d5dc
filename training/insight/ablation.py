"""One-click ablation of a part of the final prompt: does this sentence, this
few-shot example, actually help?

For a finished run, each part the provenance lists (``training.insight.provenance``) can be
taken out: :func:`forecast` says first what scoring the program without it costs (the LM
calls of one pass over the examples the final candidate was scored on, by the engine's
counting rule ``forecast.evaluation_calls``), :func:`start` queues the worker
(``training.execution.ablation``) that scores it there with the run's models and reward, and
the run page shows the effect (``Ablation.difference``: without − with, and its paired
bootstrap interval). Each result is stored per run, variable and part: asking again costs
nothing. A run with a cap on LM calls keeps its cap: an ablation that would take the run's
calls (its own and its ablations') past it is refused, saying so.

The split scored is the one the final candidate was scored on in ``fit``: the validation
split (the training rows without one), never the test split, which stays the run's unbiased
figure.

Example:

    offer = ablation.forecast(run, "generator_state", 2)   # {"calls": 12, "rows": 12, ...}
    row = ablation.start(run, "generator_state", 2)        # queued, or the stored result
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from training.execution import ablation as worker
from training.execution import budget, run_config
from training.forecasting import forecast as call_forecast
from training.insight import provenance
from training.models import Ablation, Run
from training.programs.programs import ProgramError, program_from_json

#: Seconds between two polls of the page while an ablation runs (htmx ``every``).
POLL_SECONDS = 1


class AblationError(ValueError):
    """Why this part cannot be ablated (said on the page)."""


def piece_key(kind: str, text: str) -> str:
    """The stored key of a part: a hash of its kind and text (an example's JSON)."""
    return hashlib.sha256(f"{kind}:{text}".encode()).hexdigest()


def without(value: dict[str, Any], piece: provenance.Piece) -> dict[str, Any]:
    """The variable's value with the part taken out: a sentence's first occurrence removed
    from the instructions (the spaces around it closed up), or the example removed."""
    value = dict(value)
    if piece.kind == "sentence":
        text = str(value.get("instructions") or "")
        at = text.find(piece.text)
        if at >= 0:
            text = text[:at].rstrip(" \t") + " " + text[at + len(piece.text) :].lstrip(" \t")
        value["instructions"] = re.sub(r"^ | $", "", text, flags=re.MULTILINE).strip()
    else:
        examples = list(value.get("examples") or [])
        for index, example in enumerate(examples):
            if json.dumps(example, sort_keys=True, ensure_ascii=False, default=str) == piece.text:
                del examples[index]
                break
        value["examples"] = examples
    return value


def _piece(run: Run, variable: str, index: int) -> tuple[dict[str, Any], provenance.Piece]:
    if run.status != Run.SUCCEEDED or not run.trained_program_json:
        raise AblationError("Ablation is offered once the run has succeeded.")
    for entry in provenance.provenance(run):
        if entry["variable"] == variable and 0 <= index < len(entry["pieces"]):
            return entry, entry["pieces"][index]
    raise AblationError("The final prompt has no such part.")


def _lm_modules(run: Run) -> int:
    try:
        program = program_from_json(run.trained_program_json)
    except ProgramError as exc:
        raise AblationError(f"This program cannot be scored here: {exc}") from None
    return sum(1 for m in program.modules if getattr(m, "language_model", None) is not None)


def forecast(run: Run, variable: str, index: int) -> dict[str, Any]:
    """What ablating part ``index`` of ``variable`` costs: ``{"piece", "rows", "split",
    "calls", "stored"}`` (``stored``: the result already there, then nothing is paid), or
    AblationError."""
    entry, piece = _piece(run, variable, index)
    stored = results(run).get((variable, piece_key(piece.kind, piece.text)))
    rewards = entry["final"].example_rewards or []
    if stored is None and not rewards:
        raise AblationError(
            "The final candidate's per-example rewards were not stored (a run from before "
            "they were): there is nothing to pair the ablation with."
        )
    x, _, split = worker.scoring_rows(run)
    rows = min(len(rewards), len(x)) if rewards else (stored.rows if stored else 0)
    calls = call_forecast.evaluation_calls(
        rows, _lm_modules(run), run_config.judge_calls(run.config or {})
    )
    return {"piece": piece, "rows": rows, "split": split, "calls": calls, "stored": stored}


def _check_cap(run: Run, calls: int) -> None:
    cap = budget.caps_of(run.config or {}).get("budget_calls")
    if cap is None:
        return
    ablated = run.ablations.aggregate(total=Sum("calls"))["total"] or 0
    pending = (
        run.ablations.filter(status__in=(Ablation.QUEUED, Ablation.RUNNING)).aggregate(
            total=Sum("forecast_calls")
        )["total"]
        or 0
    )
    used = int(run.lm_calls or 0) + ablated + pending
    if used + calls > int(cap):
        raise AblationError(
            f"This run's cap of {int(cap)} LM calls leaves {max(0, int(cap) - used)} (its "
            f"training and its ablations used {used}); this ablation needs {calls}."
        )


def start(run: Run, variable: str, index: int) -> Ablation:
    """Queue the ablation of part ``index`` of ``variable`` (the stored one when it is there,
    or still running; a failed or stale one is queued again). AblationError if it cannot."""
    offer = forecast(run, variable, index)
    stored = offer["stored"]
    if stored is not None and (stored.status == Ablation.DONE or is_live(stored)):
        return stored
    _check_cap(run, offer["calls"])
    piece = offer["piece"]
    entry_value = provenance.final_candidate(run, variable).value or {}
    fields = {
        "kind": piece.kind,
        "value": without(entry_value, piece),
        "split": offer["split"],
        "rows": offer["rows"],
        "forecast_calls": offer["calls"],
        "status": Ablation.QUEUED,
        "error": "",
        "started_at": None,
        "finished_at": None,
    }
    key = piece_key(piece.kind, piece.text)
    try:
        with transaction.atomic():
            row, created = Ablation.objects.select_for_update().get_or_create(
                run=run, variable=variable, key=key, defaults=fields
            )
            if not created:
                if row.status == Ablation.DONE or is_live(row):
                    return row  # a concurrent click got there first
                for name, value in fields.items():
                    setattr(row, name, value)
                row.save()
            worker.enqueue(row)
    except IntegrityError:  # the same click twice at once: the other one queued it
        return Ablation.objects.get(run=run, variable=variable, key=key)
    return row


def is_live(row: Ablation) -> bool:
    """Queued or running and not given up on: a worker that died leaves its row "running";
    past the task's time limit it is shown as failed and can be asked again."""
    if not row.pending:
        return False
    since = row.started_at or row.created
    limit = timedelta(seconds=worker.ABLATION_SECONDS + 120)
    if row.status == Ablation.QUEUED:
        limit = timedelta(minutes=30)  # waiting for a free worker behind runs
    return timezone.now() - since < limit


def results(run: Run) -> dict[tuple[str, str], Ablation]:
    """The run's stored ablations by (variable, part key)."""
    return {(a.variable, a.key): a for a in run.ablations.all()}


def annotate(run: Run, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each part of ``provenance.provenance(run)`` its stored ablation (``ablation``,
    None when never asked) and whether it is still running (``ablation_live``)."""
    stored = results(run)
    for entry in entries:
        for piece in entry["pieces"]:
            row = stored.get((entry["variable"], piece_key(piece.kind, piece.text)))
            piece.ablation = row
            piece.ablation_live = row is not None and is_live(row)
    return entries
