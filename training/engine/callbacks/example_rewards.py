"""Opt-in per-example rewards of ``evaluate`` (what the paired bootstrap needs).

``evaluate`` returns mean reward and metrics, as the guide says; a caller that also wants each
example's reward passes this callback and reads ``rewards`` afterwards.
"""

from __future__ import annotations

from training.engine.callbacks.callback import Callback


class ExampleRewards(Callback):
    """Collects one reward per evaluated example, in the order of ``x``.

    Reset at every ``on_test_begin``, so after ``evaluate`` it holds that evaluation's rewards
    (a failed prediction's reward is there as the reward gave it, usually 0.0).

    Example:
        >>> per_example = synalinks.callbacks.ExampleRewards()
        >>> logs = await program.evaluate(x_test, y_test, callbacks=[per_example])
        >>> per_example.rewards  # [1.0, 0.0, 1.0, ...], len(x_test) values
    """

    def __init__(self) -> None:
        super().__init__()
        self.rewards: list[float] = []

    async def on_test_begin(self, logs=None):
        self.rewards = []

    async def on_test_batch_end(self, batch, logs=None):
        self.rewards.extend(float(value) for value in (logs or {}).get("example_rewards", []))
