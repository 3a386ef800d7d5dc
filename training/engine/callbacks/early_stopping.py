"""EarlyStopping: stop fit when the monitored value stops improving."""

from __future__ import annotations

import math

from training.engine.callbacks.callback import Callback


class EarlyStopping(Callback):
    """Stop ``fit`` after ``patience`` epochs without improvement of ``monitor``.

    Args:
        monitor: the epoch log to watch (``"val_reward"``, ``"reward"``, ``"val_<metric>"``).
        min_delta: the smallest change that counts as an improvement.
        patience: epochs without improvement tolerated before stopping.
        mode: ``"max"`` (higher is better) or ``"min"``.
        restore_best_variables: on stopping, assign the variables of the best epoch.

    Returns:
        A callback; after ``fit``, ``stopped_epoch`` is the epoch it stopped at (or None).

    Example:

    ```python
    stop = synalinks.callbacks.EarlyStopping(monitor="val_reward", patience=2)
    await program.fit(x, y, validation_split=0.2, epochs=10, callbacks=[stop])
    ```
    """

    def __init__(
        self,
        monitor: str = "val_reward",
        min_delta: float = 0.0,
        patience: int = 0,
        mode: str = "max",
        restore_best_variables: bool = False,
    ):
        super().__init__()
        if mode not in ("max", "min"):
            raise ValueError(f"EarlyStopping: mode must be 'max' or 'min', got {mode!r}")
        self.monitor = monitor
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.mode = mode
        self.restore_best_variables = restore_best_variables
        self.stopped_epoch: int | None = None

    async def on_train_begin(self, logs=None):
        self.wait = 0
        self.best = -math.inf if self.mode == "max" else math.inf
        self.best_variables = None
        self.stopped_epoch = None

    async def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        better = (
            value > self.best + self.min_delta
            if self.mode == "max"
            else value < self.best - self.min_delta
        )
        if better:
            self.best = value
            self.wait = 0
            if self.restore_best_variables:
                self.best_variables = self.program.get_variables()
            return
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch = epoch
            self.program.stop_training = True
            if self.restore_best_variables and self.best_variables is not None:
                self.program.set_variables(self.best_variables)
