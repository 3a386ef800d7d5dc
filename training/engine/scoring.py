"""What rewards and metrics share: a name, field masks, batch pairing and a config.

``Reward`` and ``Metric`` both compare a ground truth with a prediction on the
masked fields, accept one sample or a batch, name themselves in error messages
and save ``{"name", "in_mask", "out_mask"}``. :class:`MaskedScorer` holds that
once so the two bases (and their errors and saved configs) cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from training.engine.masking import (
    MaskedDataModel,
    mask_pair,
    normalize_mask,
    to_dict,
    warn_unknown_out_mask,
)
from training.engine.saving import deserialize

__all__ = ["MaskedScorer", "default_name", "get_scorer", "is_batch"]


def default_name(cls: type) -> str:
    """snake_case of a class name, keeping acronyms together (``LMAsJudge`` → ``lm_as_judge``)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__)
    return name.lower()


def is_batch(value: Any) -> bool:
    """True for a list/tuple/numpy array of samples (a single DataModel or dict is not)."""
    return isinstance(value, list | tuple | np.ndarray)


class MaskedScorer:
    """Base of ``Reward`` and ``Metric``: name, masks, batch pairing, masking, config.

    Args:
        name: default: snake_case class name (e.g. ``exact_match``, ``f1_score``).
        in_mask: only compare these fields.
        out_mask: compare every field except these.

    Subclasses set ``kind`` (``"reward"``, ``"metric"``), which names them in errors.
    """

    kind = "scorer"

    def __init__(
        self,
        name: str | None = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
    ):
        cls_name = type(self).__name__
        self.name = name or default_name(type(self))
        self.in_mask = normalize_mask(in_mask, argument=f"{cls_name}(in_mask=...)")
        self.out_mask = normalize_mask(out_mask, argument=f"{cls_name}(out_mask=...)")
        self._out_mask_checked = False

    @property
    def where(self) -> str:
        return f"{self.kind} {self.name!r} ({type(self).__name__})"

    def _pairs(self, y_true: Any, y_pred: Any) -> tuple[list, list]:
        """Ground truths and predictions as two equally long lists (``None`` truths allowed)."""
        trues = list(y_true) if is_batch(y_true) else [y_true]
        preds = list(y_pred) if is_batch(y_pred) else [y_pred]
        if y_true is None:
            trues = [None] * len(preds)
        if len(trues) != len(preds):
            raise ValueError(
                f"{self.where}: y_true has {len(trues)} samples but y_pred has {len(preds)}"
            )
        return trues, preds

    def _prepare(
        self, y_true: Any, y_pred: Any
    ) -> tuple[MaskedDataModel | None, MaskedDataModel | None]:
        try:
            pair = mask_pair(y_true, y_pred, self.in_mask, self.out_mask)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.where}: {exc}") from exc
        if self.out_mask and not self._out_mask_checked and None not in (y_true, y_pred):
            self._warn_unknown_out_mask(y_true, y_pred)
        return pair

    def _warn_unknown_out_mask(self, y_true: Any, y_pred: Any) -> None:
        """Warn once per scorer when ``out_mask`` names a field neither side has.

        Checked on the first pair where both sides exist (a failed prediction's
        ``None`` would hide the fields a ChainOfThought adds).
        """
        self._out_mask_checked = True
        available = set(to_dict(y_true) or {}) | set(to_dict(y_pred) or {})
        warn_unknown_out_mask(self.out_mask, available, self.where)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "in_mask": self.in_mask, "out_mask": self.out_mask}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        return cls(**config)


def get_scorer(identifier: Any, base: type, wrapper: type) -> Any:
    """``rewards.get`` / ``metrics.get``: an instance of ``base`` from an instance,
    a registered name or config, or a function (wrapped in ``wrapper``)."""
    if identifier is None or isinstance(identifier, base):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        return deserialize({"class_name": identifier, "config": {}})
    if callable(identifier):
        return wrapper(fn=identifier)
    raise ValueError(f"Cannot interpret {identifier!r} as a {base.kind}")
