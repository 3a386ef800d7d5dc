"""TrainingEvents: the one place ``fit`` announces each moment of training.

Each moment reaches the callbacks twice, from here only: as the Keras-style hook
(``on_epoch_begin``, ``on_batch_end``, ...) and as the structured, JSON-serialisable event
dict that ``on_event`` receives and the dashboard streams (docs/ARCHITECTURE.md, "Events").
Keeping both in one method per moment means the hook and the event can never drift apart.
The optimizer's own events (``candidate``, ``optimizer_error``) go through
``Optimizer.emit``.
"""

from __future__ import annotations

from typing import Any

from training.engine.callbacks.callback import CallbackList


class TrainingEvents:
    """Emits the moments of ``fit`` to a :class:`CallbackList`: hook and event together.

    Args:
        callbacks: the callbacks of this ``fit``.

    Example:

    ```python
    events = TrainingEvents(CallbackList([recorder]))
    await events.epoch_begin(epoch=0, epochs=3)
    # recorder got {"type": "epoch_begin", "epoch": 0, "epochs": 3}, then on_epoch_begin(0)
    ```
    """

    def __init__(self, callbacks: CallbackList) -> None:
        self.callbacks = callbacks

    async def train_begin(
        self, epochs: int, initial_epoch: int, steps: int, seed: int, initial_batch: int = 0
    ) -> None:
        """``initial_batch``: the first batch of ``initial_epoch`` this fit trains (a paused
        fit resumed goes on after the batches its pause point has done; 0 otherwise)."""
        await self.callbacks.on_train_begin()
        await self.callbacks.on_event(
            {
                "type": "train_begin",
                "epochs": epochs,
                "initial_epoch": initial_epoch,
                "initial_batch": initial_batch,
                "steps": steps,
                "seed": seed,
            }
        )

    async def epoch_begin(self, epoch: int, epochs: int) -> None:
        # The event goes first here (the dashboard marks the epoch before any hook's output).
        await self.callbacks.on_event({"type": "epoch_begin", "epoch": epoch, "epochs": epochs})
        await self.callbacks.on_epoch_begin(epoch)

    async def batch_begin(self, batch: int) -> None:
        """A hook only: nothing is streamed before a batch has a result."""
        await self.callbacks.on_batch_begin(batch)

    async def batch_end(
        self, epoch: int, batch: int, batches: int, logs: dict[str, Any], failures: int
    ) -> None:
        await self.callbacks.on_batch_end(batch, logs)
        await self.callbacks.on_event(
            {
                "type": "batch_end",
                "epoch": epoch,
                "batch": batch,
                "batches": batches,
                "logs": dict(logs),
                "failures": failures,
            }
        )

    async def epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        await self.callbacks.on_epoch_end(epoch, logs)
        await self.callbacks.on_event({"type": "epoch_end", "epoch": epoch, "logs": dict(logs)})

    async def paused(self, point: dict[str, Any]) -> None:
        """An event only: fit paused at a batch boundary (``program.pause_requested``) and
        returns without ending training; ``point`` (``PausePoint.to_json``) is what
        ``fit(resume_from=...)`` goes on from, the program's state (``get_config``) is the
        rest."""
        await self.callbacks.on_event(
            {"type": "paused", "epoch": point["epoch"], "batch": point["batch"], "point": point}
        )

    async def train_end(self, logs: dict[str, Any], stopped: bool) -> None:
        await self.callbacks.on_train_end(logs)
        await self.callbacks.on_event({"type": "train_end", "logs": dict(logs), "stopped": stopped})
