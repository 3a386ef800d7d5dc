"""The optimizers the dashboard offers, from settings (as Django's ``PASSWORD_HASHERS``).

``TRAINBOARD_OPTIMIZERS`` lists engine optimizer classes by dotted path, in the launch form's
order. Everything the dashboard does per optimizer reads the class it finds here: its
``PARAMETERS`` (form fields, bounds, help) and its ``CARD`` (``engine/optimizers/card.py``:
field prefix, help, how it proposes candidates for the forecast, what it needs). Adding an
optimizer is its engine file and one line in the setting; nothing here names one.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from training.engine.optimizers.card import Card


class UnknownOptimizer(ValueError):
    """An optimizer name the dashboard does not offer; the message lists those it does."""


@functools.cache
def classes() -> dict[str, type]:
    """{name: engine class} of the offered optimizers, in the setting's order."""
    found = {}
    for path in settings.TRAINBOARD_OPTIMIZERS:
        cls = import_string(path)
        if getattr(cls, "CARD", None) is None:
            raise TypeError(f"TRAINBOARD_OPTIMIZERS: {path} declares no CARD")
        found[cls.__name__] = cls
    return found


@receiver(setting_changed)
def _forget(setting: str, **kwargs: Any) -> None:
    if setting == "TRAINBOARD_OPTIMIZERS":
        classes.cache_clear()


def names() -> tuple[str, ...]:
    return tuple(classes())


def get(name: str) -> type:
    """The class of optimizer ``name``; UnknownOptimizer when it is not offered."""
    found = classes().get(name)
    if found is None:
        raise UnknownOptimizer(f"must be one of {', '.join(names())}, got {name!r}")
    return found


def card(name: str) -> Card:
    return get(name).CARD


def offered(name: str) -> bool:
    return name in classes()


def recommended(label_task: bool) -> str:
    """The optimizer the launch form starts with: on a program answering a label field, the
    first whose card recommends it for label tasks; else the first that does not."""
    for name, cls in classes().items():
        if cls.CARD.label_tasks == label_task:
            return name
    return names()[0]


def field_name(name: str, parameter: str) -> str:
    """A parameter's launch-form field (``rfs_nb_max_examples``)."""
    return card(name).prefix + parameter


def split_field(field: str) -> tuple[str, str] | None:
    """(optimizer, parameter) of a launch-form field, or None when it is none's."""
    for name, cls in classes().items():
        if field.startswith(cls.CARD.prefix):
            return name, field[len(cls.CARD.prefix) :]
    return None
