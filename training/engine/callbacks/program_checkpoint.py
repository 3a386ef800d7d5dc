"""ProgramCheckpoint: save the program (or its variables) when the monitored value improves."""

from __future__ import annotations

import logging
import math

from training.engine.callbacks.callback import Callback

logger = logging.getLogger(__name__)


class ProgramCheckpoint(Callback):
    """Save the program (or only its variables) at the end of epochs.

    Args:
        filepath: where to write; may contain ``{epoch}`` (1-based) and any log key, e.g.
            ``"ckpt_{epoch:02d}.json"``.
        monitor: the epoch log compared when ``save_best_only``.
        mode: ``"max"`` (higher is better) or ``"min"``.
        save_best_only: save only when ``monitor`` improved.
        save_variables_only: write ``save_variables`` files instead of whole programs.
        verbose: 1 prints each save.

    Returns:
        A callback; ``saved`` lists the paths it wrote.

    Example:

    ```python
    checkpoint = synalinks.callbacks.ProgramCheckpoint(
        filepath="best.json", monitor="val_reward", mode="max", save_best_only=True
    )
    await program.fit(x, y, validation_split=0.2, epochs=5, callbacks=[checkpoint])
    ```
    """

    def __init__(
        self,
        filepath: str,
        monitor: str = "val_reward",
        mode: str = "max",
        save_best_only: bool = False,
        save_variables_only: bool = False,
        verbose: int = 0,
    ):
        super().__init__()
        if mode not in ("max", "min"):
            raise ValueError(f"ProgramCheckpoint: mode must be 'max' or 'min', got {mode!r}")
        self.filepath = str(filepath)
        self.monitor = monitor
        self.mode = mode
        self.save_best_only = save_best_only
        self.save_variables_only = save_variables_only
        self.verbose = verbose
        self.best = -math.inf if mode == "max" else math.inf
        self.saved: list[str] = []

    def _improved(self, value: float) -> bool:
        return value > self.best if self.mode == "max" else value < self.best

    async def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                logger.warning(
                    "ProgramCheckpoint: %r is not in the logs (%s); nothing saved",
                    self.monitor,
                    sorted(logs),
                )
                return
            if not self._improved(value):
                return
            self.best = value
        if self.save_variables_only:
            self.program.save_variables(path)
        else:
            self.program.save(path)
        self.saved.append(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saved program to {path}")
