"""How failed predictions decide a run's status, and what the run page says about them.

- An evaluation, or a training epoch, in which every prediction failed fails the run: its
  error is the first failure's message (the provider's words, secrets redacted by the
  engine), so a run on a model that can never answer is never "Succeeded" with reward 0.
- A run with some failed predictions succeeds, and its usage records how many predictions
  it made (``predictions``) and each distinct error with its count (``prediction_errors``),
  which the run page shows as "N of M predictions failed".

The counts are the engine's running totals on the program (``predictions``,
``failed_predictions``, ``prediction_errors``); a :class:`Mark` is a snapshot of them, so a
phase is judged on what happened since its mark. A training epoch paused and resumed is
judged whole: the totals start again in the attempt that resumes, and the part before the
pause is the engine's ``PausePoint.predictions`` (``AllFailedEpochs(resumed_from=point)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training.engine.callbacks import Callback
from training.engine.trainers.pause_point import EpochPredictions, PausePoint


@dataclass(frozen=True)
class Mark:
    """The program's prediction totals at one moment."""

    predictions: int
    failed: int
    errors: dict[str, int]

    @classmethod
    def of(cls, program: Any) -> Mark:
        return cls(program.predictions, program.failed_predictions, dict(program.prediction_errors))


def all_failed(
    program: Any, since: Mark, what: str, before: EpochPredictions | None = None
) -> str | None:
    """The run's error if every prediction ``program`` made since ``since`` failed (and every
    one of ``before``), else None.

    Args:
        program: the engine program (its running totals).
        since: the totals when the phase began (in this attempt).
        what: the phase, for the message ("the before-training evaluation 1", "epoch 2").
        before: the phase's predictions made before this attempt (a paused epoch's part
            before the pause), or None.
    """
    start = EpochPredictions(since.predictions, since.failed, since.errors)
    phase = (before or EpochPredictions()).plus(EpochPredictions.totals(program).minus(start))
    if phase.made == 0 or phase.failed < phase.made:
        return None
    first = next(iter(phase.errors), "no error message was recorded")
    return f"All {phase.made} predictions of {what} failed. First error: {first}"


class AllFailedEpochs(Callback):
    """Stops ``fit`` after an epoch in which every prediction failed; ``error`` says why.

    Args:
        resumed_from: the pause point ``fit`` resumes from (None: none): its epoch is judged
            with the predictions made before the pause (``PausePoint.predictions``).

    Example:

    ```python
    failed_epochs = AllFailedEpochs(resumed_from=PausePoint.from_json(run.checkpoint_position))
    await program.fit(x, y, callbacks=[failed_epochs], resume_from=run.checkpoint_position)
    ```
    """

    def __init__(self, resumed_from: PausePoint | None = None):
        super().__init__()
        self.error: str | None = None
        self.resumed_from = resumed_from
        self._mark: Mark | None = None
        self._before: EpochPredictions | None = None

    async def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._mark = Mark.of(self.program)
        point = self.resumed_from
        self._before = point.predictions if point is not None and point.epoch == epoch else None
        self.resumed_from = None  # the epochs after it start afresh

    async def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._mark is None or self.error is not None:
            return
        self.error = all_failed(
            self.program, self._mark, f"training epoch {epoch + 1}", before=self._before
        )
        if self.error is not None:
            self.program.stop_training = True


def usage_fields(program: Any, base_usage: dict) -> dict[str, Any]:
    """``predictions`` and ``prediction_errors`` (``[[message, count], …]``, most frequent
    first) for the run's usage, added to those of earlier attempts (``base_usage``)."""
    errors: dict[str, int] = {}
    for message, count in base_usage.get("prediction_errors") or []:
        errors[str(message)] = errors.get(str(message), 0) + int(count)
    for message, count in program.prediction_errors.items():
        errors[message] = errors.get(message, 0) + count
    ranked = sorted(errors.items(), key=lambda item: -item[1])
    return {
        "predictions": int(base_usage.get("predictions") or 0) + program.predictions,
        "prediction_errors": [[message, count] for message, count in ranked],
    }
