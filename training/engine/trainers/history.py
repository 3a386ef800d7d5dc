"""History: per-epoch logs returned by ``fit`` (Keras style)."""

from __future__ import annotations

from typing import Any


class History:
    """What ``fit`` returns: the logs of each epoch, its parameters and its LM usage.

    Attributes: ``history`` (``{"reward": [...], "val_reward": [...], "<metric>": [...],
    ...}``, one value per epoch), ``epoch`` (the epoch numbers), ``params`` (epochs, steps,
    batch_size, samples, validation_samples, seed, shuffle, initial_epoch) and ``usage``
    (``usage.to_dict()`` of the fit).

    Returns:
        ``to_dict()`` gives the JSON form saved with the program; ``History.from_dict``
        reads it back.

    Example:

    ```python
    history = await program.fit(x, y, validation_split=0.2, epochs=3)
    synalinks.utils.plot_history(history)
    print(history.history["val_reward"][-1])
    ```
    """

    def __init__(self) -> None:
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []
        self.params: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}

    def append(self, epoch: int, logs: dict[str, Any]) -> None:
        self.epoch.append(epoch)
        for key, value in logs.items():
            if isinstance(value, int | float) or value is None:
                self.history.setdefault(key, []).append(value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "history": self.history,
            "epoch": self.epoch,
            "params": self.params,
            "usage": self.usage,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        history = cls()
        history.history = {k: list(v) for k, v in data.get("history", {}).items()}
        history.epoch = list(data.get("epoch", []))
        history.params = dict(data.get("params", {}))
        history.usage = dict(data.get("usage", {}))
        return history

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
