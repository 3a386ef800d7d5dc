"""Finding an optimizer class, and its card, by the class name a tool stored.

Why: a tool (the dashboard's forecast, its launch form) holds an optimizer's class name, not the
class. The engine's optimizers are the subclasses of :class:`Optimizer` that declare a card, so
the lookup walks those subclasses. It lives above both ``card.py`` and ``optimizer.py``: the
card is plain data that ``Optimizer`` names, and the lookup needs ``Optimizer`` itself, so
neither of the two imports the other back.
"""

from __future__ import annotations

from training.engine.optimizers.card import Card
from training.engine.optimizers.optimizer import Optimizer


def optimizer_class(name: str) -> type:
    """The engine's optimizer class called ``name`` (any imported subclass of Optimizer)."""
    pending = list(Optimizer.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls.__name__ == name and cls.CARD is not None:
            return cls
        pending.extend(cls.__subclasses__())
    raise ValueError(f"optimizer must be one of the engine's, with a card; got {name!r}")


def card_of(name: str) -> Card:
    """The card of the optimizer class called ``name``."""
    return optimizer_class(name).CARD


__all__ = ["card_of", "optimizer_class"]
