"""The worker's side of an ablation (``training.insight.ablation`` asks for it): score a
finished run's final program with one variable set to its value without one part of the
prompt, on the examples the final candidate was scored on, with the run's models and reward.

Why a worker: the scoring calls the run's language model (a local one is loaded only in the
worker) and takes as long as a validation pass; the request that asks for it only queues it.
The scoring is bounded twice: an engine :class:`~training.engine.CallBudget` of the calls the
forecast said (plus a margin for parse retries) and :data:`ABLATION_SECONDS` (the Celery task's
time limits sit just above it). Its calls are the ablation's own (``Ablation.calls``), not the
run's: the run's figures stay what the run measured.

The effect is the engine's ``paired_bootstrap`` of the rewards without the part against the
final candidate's stored rewards on the same examples (``Candidate.example_rewards``, the
first ``MAX_EXAMPLE_REWARDS`` of its scoring set, in order).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from celery import shared_task
from django.db import close_old_connections, transaction
from django.utils import timezone

import training.engine as synalinks
from datasets.services import get_split
from datasets.versions import human_marks
from training.engine.data_model import create_data_model
from training.engine.language_models.redaction import redact
from training.engine.trainers.data_adapter import scoring_positions
from training.engine.utils.paired_bootstrap import paired_bootstrap
from training.execution import run_config
from training.execution.run_config import build_reward
from training.models import Ablation, Run
from training.programs.programs import (
    ProgramError,
    callable_document,
    program_language_model,
)

logger = logging.getLogger(__name__)

ABLATION_TASK = "training.ablate"
#: The most seconds one ablation's scoring may take (its task's limits sit just above).
ABLATION_SECONDS = 300.0
#: Share of extra calls the budget allows over the forecast, for parse retries.
RETRY_MARGIN = 0.1
#: Examples scored together (as ``fit``'s scoring does, batch by batch).
BATCH_SIZE = 16


def scoring_rows(run: Run) -> tuple[list[dict], list[dict], str]:
    """(inputs, targets, split name) of the rows ``fit`` scored candidates on, in the run's
    order of its training rows: the validation split (``data_adapter.scoring_positions``),
    or the training rows themselves without one."""
    x, y = get_split(run.dataset, "train", run_config.spreads_by_label(run.config))
    config = run.config or {}
    validation = float(config.get("validation_split") or 0.0)
    positions = scoring_positions(len(x), validation, float(config["selection_split"]))
    return (
        [x[p] for p in positions],
        [y[p] for p in positions],
        ("validation" if validation > 0 else "training"),
    )


@shared_task(
    name=ABLATION_TASK,
    soft_time_limit=ABLATION_SECONDS + 30,
    time_limit=ABLATION_SECONDS + 60,
)
def ablate(ablation_id: int) -> str:
    """Score one queued ablation (see the module docstring); its final status."""
    close_old_connections()
    try:
        return execute(ablation_id)
    finally:
        close_old_connections()


def enqueue(ablation: Ablation) -> None:
    """Send the ablation to a worker once the transaction commits; a broker that does not take
    it fails the row with the reason (nothing would ever score it)."""
    ablation_id = ablation.pk

    def send() -> None:
        try:
            ablate.apply_async(args=[ablation_id], retry=True)
        except Exception as exc:
            _fail(ablation_id, f"The task broker did not take the ablation ({type(exc).__name__}).")

    transaction.on_commit(send)


def _claim(ablation_id: int) -> Ablation | None:
    with transaction.atomic():
        row = (
            Ablation.objects.select_for_update()
            .select_related("run", "run__dataset", "run__owner")
            .filter(pk=ablation_id, status=Ablation.QUEUED)
            .first()
        )
        if row is None:
            return None
        row.status, row.started_at = Ablation.RUNNING, timezone.now()
        row.save(update_fields=["status", "started_at"])
        return row


def _fail(ablation_id: int, message: str) -> None:
    Ablation.objects.filter(pk=ablation_id).update(
        status=Ablation.FAILED, error=redact(message)[:500], finished_at=timezone.now()
    )


def execute(ablation_id: int) -> str:
    """Claim the queued ablation, score it, store the result (or why it failed)."""
    row = _claim(ablation_id)
    if row is None:
        return "skipped"
    try:
        baseline, result = _score(row)
    except TimeoutError:
        _fail(row.pk, f"The scoring did not finish within {ABLATION_SECONDS:.0f} s.")
        return Ablation.FAILED
    except synalinks.LanguageModelUnreachable as exc:
        _fail(row.pk, f"The run's language model cannot be reached: {exc}")
        return Ablation.FAILED
    except ProgramError as exc:
        _fail(row.pk, f"This program cannot run here: {exc}")
        return Ablation.FAILED
    except Exception as exc:
        logger.exception("ablation %s failed", row.pk)
        _fail(row.pk, f"{type(exc).__name__}: {exc}")
        return Ablation.FAILED
    rewards, calls = result
    paired = paired_bootstrap(baseline, rewards)
    Ablation.objects.filter(pk=row.pk).update(
        status=Ablation.DONE,
        calls=calls,
        example_rewards=[round(float(r), 4) for r in rewards],
        reward=sum(rewards) / len(rewards),
        full_reward=sum(baseline) / len(baseline),
        difference=paired.difference,
        low=paired.low,
        high=paired.high,
        within_noise=paired.within_noise,
        finished_at=timezone.now(),
    )
    return Ablation.DONE


def _score(row: Ablation) -> tuple[list[float], tuple[list[float], int]]:
    """(the final candidate's stored rewards, (the rewards without the part, LM calls))."""
    run = row.run
    final = (
        run.candidates.filter(variable=row.variable, status="best").first()
        or run.candidates.filter(variable=row.variable).exclude(reward=None).first()
    )
    baseline = [float(r) for r in (final.example_rewards or [])] if final else []
    x, y, _ = scoring_rows(run)
    count = min(row.rows, len(baseline), len(x))
    if count == 0:
        raise ValueError("the final candidate has no stored rewards to compare with")
    document = callable_document(run.trained_program_json, run.owner)
    program = synalinks.Program.from_config(document, compile=False)
    program.compile(
        reward=build_reward(
            run.config,
            marks=human_marks(run.dataset),
            program_model=program_language_model(program),
        )
    )
    variable = next((v for v in program.trainable_variables if v.name == row.variable), None)
    if variable is None:
        raise ValueError(f"the trained program has no variable {row.variable!r}")
    variable.assign(row.value)
    input_model = program.inputs[0].data_model
    target_model = create_data_model("Target", run.dataset.target_schema_fields())
    names = list(input_model.model_fields)
    items = [input_model(**{n: r.get(n) for n in names}) for r in x[:count]]
    truths = [
        synalinks.rewards.attach_inputs(target_model(**t), item)
        for t, item in zip(y[:count], items, strict=True)
    ]
    budget = synalinks.CallBudget(
        calls=int(row.forecast_calls * (1 + RETRY_MARGIN)) + 1, seconds=ABLATION_SECONDS
    )
    result = asyncio.run(
        asyncio.wait_for(_evaluate(program, items, truths, budget), ABLATION_SECONDS)
    )
    return baseline[:count], result


async def _evaluate(
    program: Any, items: list, truths: list, budget: Any
) -> tuple[list[float], int]:
    per_example = synalinks.callbacks.ExampleRewards()
    with synalinks.usage.track() as usage, budget.applied():
        await program.evaluate(items, truths, batch_size=BATCH_SIZE, callbacks=[per_example])
    if getattr(program, "budget_exhausted", None):
        raise ValueError("the scoring needed more LM calls than its forecast allowed")
    if len(per_example.rewards) != len(items):
        raise ValueError("the scoring stopped before every example was scored")
    return [float(r) for r in per_example.rewards], int(usage.calls)
