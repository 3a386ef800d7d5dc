"""Turn registered objects into JSON-able dicts and back. No pickle, no eval."""

from __future__ import annotations

import inspect
from typing import Any

from training.engine.saving.registry import (
    UnknownObjectError,
    get_registered_name,
    get_registered_object,
)


def serialize(obj: Any) -> Any:
    """JSON form of a registered object.

    - an object with ``get_config()`` → ``{"class_name": "pkg>Name", "config": {...}}``
    - a registered function → ``{"function": "pkg>name"}``
    - ``None`` and plain JSON values pass through.
    """
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, list | tuple):
        return [serialize(item) for item in obj]
    if hasattr(obj, "get_config") and not inspect.isclass(obj):
        return {"class_name": get_registered_name(type(obj)), "config": obj.get_config()}
    if callable(obj):
        return {"function": get_registered_name(obj)}
    raise UnknownObjectError(
        f"Cannot serialize {obj!r}: it has no get_config() and is not registered"
    )


def deserialize(data: Any, custom_objects: dict[str, Any] | None = None) -> Any:
    """Inverse of :func:`serialize`; unknown names raise :class:`UnknownObjectError`."""
    if data is None or isinstance(data, str | int | float | bool):
        return data
    if isinstance(data, list):
        return [deserialize(item, custom_objects) for item in data]
    if isinstance(data, dict) and "function" in data:
        return get_registered_object(data["function"], custom_objects)
    if isinstance(data, dict) and "class_name" in data:
        cls = get_registered_object(data["class_name"], custom_objects)
        config = data.get("config") or {}
        if not inspect.isclass(cls):
            raise UnknownObjectError(f"{data['class_name']!r} is registered but is not a class")
        if hasattr(cls, "from_config"):
            return (
                cls.from_config(config, custom_objects=custom_objects)
                if _takes_custom(cls)
                else cls.from_config(config)
            )
        return cls(**config)
    raise ValueError(
        f"Cannot deserialize {data!r}: expected {{'class_name', 'config'}} or {{'function'}}"
    )


def _takes_custom(cls: type) -> bool:
    try:
        return "custom_objects" in inspect.signature(cls.from_config).parameters
    except (TypeError, ValueError):
        return False
