"""Name registry for everything that can be saved to JSON and rebuilt.

Saved programs name classes and functions by a *registered name* (``package>Name``) rather than
by import path, so loading never imports or executes anything the file chooses: a name that was
not registered (by the engine itself, by ``@register_synalinks_serializable()``, or through
``custom_objects``) is refused with a clear error.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_REGISTRY: dict[str, Any] = {}
_NAMES: dict[int, str] = {}


class UnknownObjectError(ValueError):
    """A saved file names a class or function that is not registered.

    Args:
        message: what is unknown and how to make it known (for a programmer).
        name: the unknown name as the file gives it (short: without its package), or "".
    """

    def __init__(self, message: str, name: str = ""):
        super().__init__(message)
        self.name = name


def register_synalinks_serializable(package: str = "Custom", name: str | None = None) -> Callable:
    """Decorator registering a class or (async) function under ``package>name``.

    Use it on custom rewards, metrics and modules so a saved program can refer to them::

        @synalinks.saving.register_synalinks_serializable()
        async def my_reward(y_true, y_pred): ...
    """
    if ">" in package:
        raise ValueError(
            f"register_synalinks_serializable: package {package!r} may not contain '>'"
        )

    def decorator(obj: Any) -> Any:
        registered = f"{package}>{name or obj.__name__}"
        _REGISTRY[registered] = obj
        _NAMES[id(obj)] = registered
        if inspect.isclass(obj):
            obj._registered_name = registered
        return obj

    return decorator


def get_registered_name(obj: Any) -> str:
    """The registered name of a class, instance or function (``package>Name``)."""
    is_named = inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj)
    target = obj if is_named else type(obj)
    found = _NAMES.get(id(target))
    if found is None:
        label = getattr(target, "__qualname__", repr(target))
        raise UnknownObjectError(
            f"{label} is not registered for saving: decorate it with "
            "@synalinks.saving.register_synalinks_serializable()"
        )
    return found


def get_registered_object(name: str, custom_objects: dict[str, Any] | None = None) -> Any:
    """Look a saved name up: first in ``custom_objects`` (full or short name), then the registry."""
    short = name.split(">", 1)[-1]
    if custom_objects:
        for key in (name, short):
            if key in custom_objects:
                return custom_objects[key]
    if name in _REGISTRY:
        return _REGISTRY[name]
    matches = [key for key in _REGISTRY if key.split(">", 1)[-1] == short]
    if ">" not in name and len(matches) == 1:
        return _REGISTRY[matches[0]]
    raise UnknownObjectError(
        f"Unknown class or function {name!r} in saved data: register it with "
        "@synalinks.saving.register_synalinks_serializable() or pass "
        f"custom_objects={{{short!r}: ...}}. Nothing is imported or executed on load.",
        name=short,
    )


def registered_names() -> list[str]:
    """All registered names, sorted (for error messages and the dashboard)."""
    return sorted(_REGISTRY)
