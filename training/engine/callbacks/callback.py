"""Callback base class and the CallbackList that fans events out.

Besides the Keras-style hooks, ``on_event(event)`` receives the structured, JSON-serialisable
events the dashboard streams (epoch_begin, batch_end, epoch_end, candidate, ...); ``fit`` sends
hook and event of each moment from one place, :mod:`training.engine.callbacks.training_events`.
"""

from __future__ import annotations

from typing import Any


class Callback:
    """Base class of callbacks: override any of the async hooks.

    ``self.program`` is the program being trained (set by ``set_program``) and
    ``self.params`` the fit's parameters (epochs, steps, batch_size, samples, seed, ...). During
    ``fit`` each moment arrives as its hook and as an ``on_event`` dict (both sent by
    :class:`~training.engine.callbacks.training_events.TrainingEvents`).

    Returns:
        Hooks return nothing; a callback stops training with ``self.program.stop_training =
        True``.

    Example:

    ```python
    class PrintReward(synalinks.callbacks.Callback):
        async def on_epoch_end(self, epoch, logs=None):
            print(epoch, logs["reward"])
    ```
    """

    def __init__(self) -> None:
        self.program = None
        self.params: dict[str, Any] = {}

    def set_program(self, program: Any) -> None:
        self.program = program

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_rows(self, x: list, y: list) -> None:
        """The rows the coming ``fit`` or ``evaluate`` works on, inputs and targets in order
        (an extension of the guide, for a callback that mirrors the run elsewhere: fit gives
        its training rows, then validation and selection rows; evaluate its own). The base
        keeps nothing: most callbacks never need the data."""

    async def on_train_begin(self, logs=None): ...
    async def on_train_end(self, logs=None): ...
    async def on_epoch_begin(self, epoch, logs=None): ...
    async def on_epoch_end(self, epoch, logs=None): ...
    async def on_batch_begin(self, batch, logs=None): ...
    async def on_batch_end(self, batch, logs=None): ...
    async def on_test_begin(self, logs=None): ...
    async def on_test_end(self, logs=None): ...
    async def on_test_batch_end(self, batch, logs=None): ...
    async def on_predict_begin(self, logs=None): ...
    async def on_predict_end(self, logs=None): ...
    async def on_event(self, event: dict[str, Any]): ...


class CallbackList(Callback):
    """Calls every callback in order, awaiting each (so a slow one applies back-pressure).

    Args:
        callbacks: the callbacks, called in this order.
        program: the program to give them (``set_program``).

    Example:

    ```python
    callback_list = CallbackList([recorder, synalinks.callbacks.ProgressBar()], program=program)
    await callback_list.on_epoch_begin(0)
    ```
    """

    def __init__(self, callbacks: list[Callback] | None = None, program: Any = None):
        super().__init__()
        self.callbacks = list(callbacks or [])
        for callback in self.callbacks:
            if not isinstance(callback, Callback):
                raise TypeError(f"callbacks must be Callback instances, got {callback!r}")
        if program is not None:
            self.set_program(program)

    def append(self, callback: Callback) -> None:
        self.callbacks.append(callback)
        if self.program is not None:
            callback.set_program(self.program)

    def set_program(self, program: Any) -> None:
        super().set_program(program)
        for callback in self.callbacks:
            callback.set_program(program)

    def set_params(self, params: dict[str, Any]) -> None:
        super().set_params(params)
        for callback in self.callbacks:
            callback.set_params(params)

    def set_rows(self, x: list, y: list) -> None:
        for callback in self.callbacks:
            callback.set_rows(x, y)

    async def _all(self, method: str, *args: Any) -> None:
        for callback in self.callbacks:
            await getattr(callback, method)(*args)

    async def on_train_begin(self, logs=None):
        await self._all("on_train_begin", logs)

    async def on_train_end(self, logs=None):
        await self._all("on_train_end", logs)

    async def on_epoch_begin(self, epoch, logs=None):
        await self._all("on_epoch_begin", epoch, logs)

    async def on_epoch_end(self, epoch, logs=None):
        await self._all("on_epoch_end", epoch, logs)

    async def on_batch_begin(self, batch, logs=None):
        await self._all("on_batch_begin", batch, logs)

    async def on_batch_end(self, batch, logs=None):
        await self._all("on_batch_end", batch, logs)

    async def on_test_begin(self, logs=None):
        await self._all("on_test_begin", logs)

    async def on_test_end(self, logs=None):
        await self._all("on_test_end", logs)

    async def on_test_batch_end(self, batch, logs=None):
        await self._all("on_test_batch_end", batch, logs)

    async def on_predict_begin(self, logs=None):
        await self._all("on_predict_begin", logs)

    async def on_predict_end(self, logs=None):
        await self._all("on_predict_end", logs)

    async def on_event(self, event):
        await self._all("on_event", event)
