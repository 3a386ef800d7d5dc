"""Opt-in per-example results of ``evaluate`` (what the paired bootstrap and the dashboard's
per-example table need).

``evaluate`` returns mean reward and metrics, as the guide says; a caller that also wants each
example's reward passes this callback and reads ``rewards`` afterwards, and with
``predictions=True`` each example's output (as JSON) and, for a failed prediction, why.
"""

from __future__ import annotations

from typing import Any

from training.engine.callbacks.callback import Callback


class ExampleRewards(Callback):
    """Collects one reward per evaluated example, in the order of ``x``.

    Reset at every ``on_test_begin``, so after ``evaluate`` it holds that evaluation's results
    (a failed prediction's reward is there as the reward gave it, usually 0.0).

    Args:
        predictions: also keep each example's output (``predictions``: its JSON dict, None
            when the prediction failed) and error (``errors``: None when it succeeded, else
            the redacted message). Off by default: outputs can be large.

    Example:
        >>> per_example = synalinks.callbacks.ExampleRewards(predictions=True)
        >>> logs = await program.evaluate(x_test, y_test, callbacks=[per_example])
        >>> per_example.rewards  # [1.0, 0.0, 1.0, ...], len(x_test) values
        >>> per_example.predictions[1], per_example.errors[1]  # ({"answer": "7"}, None)
    """

    def __init__(self, predictions: bool = False) -> None:
        super().__init__()
        self.keep_predictions = bool(predictions)
        self.rewards: list[float] = []
        self.predictions: list[dict[str, Any] | None] = []
        self.errors: list[str | None] = []

    async def on_test_begin(self, logs=None):
        self.rewards = []
        self.predictions = []
        self.errors = []

    async def on_test_batch_end(self, batch, logs=None):
        logs = logs or {}
        rewards = [float(value) for value in logs.get("example_rewards", [])]
        self.rewards.extend(rewards)
        if not self.keep_predictions:
            return
        outputs = list(logs.get("example_predictions") or [None] * len(rewards))
        errors = list(logs.get("example_errors") or [None] * len(rewards))
        for output, error in zip(outputs, errors, strict=False):
            self.predictions.append(_as_json(output))
            self.errors.append(error if output is None else None)


def _as_json(output: Any) -> dict[str, Any] | None:
    if output is None:
        return None
    if hasattr(output, "get_json"):
        return output.get_json()
    return output if isinstance(output, dict) else {"value": output}
