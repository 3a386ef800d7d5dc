"""ProgressBar: a terminal progress line for fit and evaluate (no dependency)."""

from __future__ import annotations

import sys
import time

from training.engine.callbacks.callback import Callback


def _format_logs(logs: dict | None) -> str:
    return " - ".join(
        f"{key}: {value:.4f}"
        for key, value in (logs or {}).items()
        if isinstance(value, int | float)
    )


class ProgressBar(Callback):
    """A terminal progress line per epoch (``verbose=1`` in fit / evaluate adds one).

    Args:
        stream: where to write (standard error by default).
        width: characters of the bar.

    Returns:
        A callback.

    Example:

    ```python
    await program.fit(x, y, epochs=2, callbacks=[synalinks.callbacks.ProgressBar()])
    ```
    """

    def __init__(self, stream=None, width: int = 24):
        super().__init__()
        self.stream = stream or sys.stderr
        self.width = width
        self._start = time.perf_counter()

    def _bar(self, done: int, total: int) -> str:
        total = max(total, 1)
        filled = int(self.width * done / total)
        return "[" + "=" * filled + "." * (self.width - filled) + f"] {done}/{total}"

    async def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self.stream.write(f"Epoch {epoch + 1}/{self.params.get('epochs', '?')}\n")

    async def on_batch_end(self, batch, logs=None):
        total = self.params.get("steps", batch + 1)
        self.stream.write(f"\r{self._bar(batch + 1, total)} - {_format_logs(logs)}")
        self.stream.flush()

    async def on_epoch_end(self, epoch, logs=None):
        elapsed = time.perf_counter() - self._start
        self.stream.write(f"\r{self._bar(1, 1)} - {elapsed:.1f}s - {_format_logs(logs)}\n")
        self.stream.flush()

    async def on_test_batch_end(self, batch, logs=None):
        total = (logs or {}).get("batches", batch + 1)
        self.stream.write(f"\revaluate {self._bar(batch + 1, total)}")
        self.stream.flush()

    async def on_test_end(self, logs=None):
        self.stream.write(f"\revaluate - {_format_logs(logs)}\n")
        self.stream.flush()
