"""Custom reward/metric functions are saved by their registered name, never as code.

``MeanRewardWrapper(fn=my_reward)`` stores ``"fn": "Custom>my_reward"`` in its
config; loading looks that name up in the registry (or ``custom_objects``), so a
saved program can never make us import or execute anything it names itself.
:class:`FunctionWrapper` is that logic once, for ``MeanRewardWrapper`` and
``MeanMetricWrapper``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from training.engine.saving import (
    UnknownObjectError,
    get_registered_name,
    get_registered_object,
)

__all__ = [
    "FunctionWrapper",
    "call_function",
    "check_callable",
    "function_name",
    "registered_function_name",
    "resolve_function",
]


def function_name(fn: Callable) -> str:
    """A readable name for ``fn`` (used as default reward/metric name and in errors)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def check_callable(fn: Any, owner: str) -> Callable:
    """``fn`` itself, or a TypeError saying that ``owner`` wants a function."""
    if not callable(fn):
        raise TypeError(f"{owner}(fn=...) expects an async function, got {fn!r:.80}")
    return fn


def registered_function_name(fn: Callable, owner: str) -> str:
    """The registered name of ``fn``, or a clear error saying how to register it."""
    try:
        return get_registered_name(fn)
    except UnknownObjectError:
        raise UnknownObjectError(
            f"{owner} cannot save function {function_name(fn)!r}: it is not registered. "
            "Decorate it with @synalinks.saving.register_synalinks_serializable() so the "
            "saved config can name it (code is never saved)."
        ) from None


def resolve_function(name: Any, owner: str, custom_objects: dict | None = None) -> Callable:
    """Inverse of :func:`registered_function_name`; refuses anything but a registered callable."""
    if callable(name):  # already resolved (e.g. ``from_config`` after ``deserialize``)
        return name
    if isinstance(name, dict) and "function" in name:
        name = name["function"]
    if not isinstance(name, str):
        raise ValueError(
            f"{owner}: config 'fn' must be a registered function name, got {name!r:.80}"
        )
    fn = get_registered_object(name, custom_objects)
    if not callable(fn) or inspect.isclass(fn):
        raise UnknownObjectError(f"{owner}: {name!r} is registered but is not a function")
    return fn


async def call_function(fn: Callable, *args: Any) -> Any:
    """Call a sync or async function and await its result when needed."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class FunctionWrapper:
    """Mixin for ``MeanRewardWrapper`` / ``MeanMetricWrapper``: a reward or metric around ``fn``.

    Put it before the ``Reward``/``Metric`` base. It names the scorer after
    ``fn``, reports errors as coming from the custom function, hands ``fn`` the
    original DataModels when no mask is set, and saves ``fn`` by its registered
    name (``"fn": "Custom>my_reward"``) next to the base's config.

    Args:
        fn: the async ``fn(y_true, y_pred) -> float``, registered with
            ``register_synalinks_serializable`` so a saved program can name it.
        name: the scorer's name (None: ``fn``'s registered name).
        in_mask: the only fields handed to ``fn`` (None: the DataModels as they are).
        out_mask: fields taken out before ``fn`` sees them.
    """

    fn: Callable
    kind: str  # from the Reward/Metric base: "reward" or "metric"

    def __init__(
        self,
        fn: Callable,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        self.fn = check_callable(fn, type(self).__name__)
        super().__init__(name=name or function_name(fn), in_mask=in_mask, out_mask=out_mask)

    @property
    def where(self) -> str:
        return f"custom {self.kind} function {function_name(self.fn)!r}"

    def _prepare(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        if self.in_mask is None and not self.out_mask:
            return y_true, y_pred
        return super()._prepare(y_true, y_pred)

    async def _call_fn(self, y_true: Any, y_pred: Any) -> Any:
        return await call_function(self.fn, y_true, y_pred)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["fn"] = registered_function_name(self.fn, type(self).__name__)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        fn = resolve_function(config.pop("fn", None), cls.__name__, custom_objects)
        return cls(fn=fn, **config)
