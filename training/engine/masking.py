"""Field masking shared by rewards and metrics.

Rewards and metrics compare a ground truth with a prediction, but usually only on
some fields: the final ``answer`` matters, the free-text ``thinking`` does not.
``in_mask`` keeps only the named fields, ``out_mask`` drops the named fields
(both may be given; ``in_mask`` is applied first).

A misspelt ``in_mask`` field would silently compare nothing (and score every
prediction the same), so an unknown ``in_mask`` field is an error that names the
field and the fields that do exist. Excluding a field that is not there is
harmless (``ExactMatch(out_mask=["thinking"])`` on a plain Generator, whose
outputs have no ``thinking``), so an unknown ``out_mask`` field only warns
(:class:`UnknownMaskFieldWarning`; a scorer warns once).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MaskedDataModel",
    "UnknownMaskFieldWarning",
    "apply_mask",
    "mask_pair",
    "normalize_mask",
    "to_dict",
    "unknown_fields",
    "warn_unknown_out_mask",
]


class UnknownMaskFieldWarning(UserWarning):
    """An ``out_mask`` names a field the data does not have (nothing to exclude)."""


class MaskedDataModel(dict):
    """The masked fields of a DataModel, as a read-only-by-convention dict.

    Custom rewards and metrics are written against the DataModel API
    (``y_true.get("answer")``, ``y_true.get_json()``); after masking we no longer
    have the original class, so this small dict subclass offers the same calls
    (plus attribute access) on the remaining fields.
    """

    def get_json(self) -> dict[str, Any]:
        """Return a plain-dict copy of the fields (like ``DataModel.get_json``)."""
        return dict(self)

    def __getattr__(self, item: str) -> Any:
        try:
            return self[item]
        except KeyError:
            raise AttributeError(
                f"{item!r} is not a field here; available fields: {sorted(self)}"
            ) from None


def to_dict(value: Any, *, what: str = "value") -> dict[str, Any] | None:
    """Convert a DataModel, pydantic model, JSON string or mapping to a plain dict.

    ``None`` stays ``None`` (a failed prediction). ``what`` names the argument in
    error messages (e.g. ``"y_pred"``).
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    get_json = getattr(value, "get_json", None)
    if callable(get_json):
        data = get_json()
        if isinstance(data, str):
            data = json.loads(data)
        if isinstance(data, Mapping):
            return dict(data)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return dict(model_dump(mode="json"))
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, Mapping):
            return dict(data)
    raise TypeError(
        f"{what} must be a DataModel, a pydantic model or a dict of fields, "
        f"got {type(value).__name__}: {value!r:.80}"
    )


def normalize_mask(mask: Any, *, argument: str = "mask") -> list[str] | None:
    """Validate a mask argument: ``None``, a field name, or a list of field names."""
    if mask is None:
        return None
    if isinstance(mask, str):
        return [mask]
    if isinstance(mask, Iterable) and not isinstance(mask, Mapping):
        fields = list(mask)
        bad = [f for f in fields if not isinstance(f, str)]
        if bad:
            raise TypeError(f"{argument} must list field names (strings); got {bad!r}")
        return fields
    raise TypeError(f"{argument} must be None or a list of field names, got {mask!r}")


def unknown_fields(mask: list[str] | None, available: Iterable[str]) -> list[str]:
    """The fields of ``mask`` that are not in ``available``, in mask order."""
    available = set(available)
    return [field for field in mask or [] if field not in available]


def warn_unknown_out_mask(
    out_mask: list[str] | None, available: Iterable[str], where: str = ""
) -> bool:
    """Warn (:class:`UnknownMaskFieldWarning`) when ``out_mask`` names absent fields.

    Returns whether it warned, so a caller can warn once.
    """
    available = set(available)
    unknown = unknown_fields(out_mask, available)
    if not unknown:
        return False
    names = ", ".join(repr(f) for f in unknown)
    prefix = f"{where}: " if where else ""
    warnings.warn(
        f"{prefix}out_mask names field(s) {names} that the data does not have; nothing to "
        f"exclude there (available fields: {sorted(available)})",
        UnknownMaskFieldWarning,
        stacklevel=3,
    )
    return True


def _check_known(mask: list[str] | None, available: set[str], argument: str) -> None:
    unknown = unknown_fields(mask, available)
    if unknown:
        names = ", ".join(repr(f) for f in unknown)
        raise ValueError(
            f"{argument} names unknown field(s) {names}; available fields: {sorted(available)}"
        )


def apply_mask(
    data: Mapping[str, Any] | Any,
    in_mask: list[str] | None = None,
    out_mask: list[str] | None = None,
    *,
    strict: bool = True,
) -> dict[str, Any] | None:
    """Keep the ``in_mask`` fields of ``data``, then drop the ``out_mask`` fields.

    ``data`` may be a dict or anything :func:`to_dict` accepts; ``None`` stays
    ``None``. With ``strict`` (the default), an ``in_mask`` naming a field that
    ``data`` does not have raises ``ValueError`` naming the field and the available
    ones, and an ``out_mask`` naming one warns (excluding an absent field is harmless).
    """
    fields = to_dict(data, what="data")
    if fields is None:
        return None
    in_mask = normalize_mask(in_mask, argument="in_mask")
    out_mask = normalize_mask(out_mask, argument="out_mask")
    if strict:
        _check_known(in_mask, set(fields), "in_mask")
        warn_unknown_out_mask(out_mask, fields)
    if in_mask is not None:
        fields = {key: fields[key] for key in in_mask if key in fields}
    if out_mask:
        fields = {key: value for key, value in fields.items() if key not in out_mask}
    return fields


def mask_pair(
    y_true: Any,
    y_pred: Any,
    in_mask: list[str] | None = None,
    out_mask: list[str] | None = None,
) -> tuple[MaskedDataModel | None, MaskedDataModel | None]:
    """Mask a ground truth and a prediction the same way.

    An ``in_mask`` field must exist in at least one of the two: a ground truth
    often lacks the ``thinking`` a ChainOfThought prediction adds, so
    ``in_mask=["thinking"]`` is valid even though ``y_true`` has no such field.
    A field the prediction lacks simply does not match the ground truth.
    ``out_mask`` fields may be absent from both (nothing is excluded); the
    scorers warn about that once (:meth:`MaskedScorer._prepare`).
    """
    true_fields = to_dict(y_true, what="y_true")
    pred_fields = to_dict(y_pred, what="y_pred")
    available = set(true_fields or {}) | set(pred_fields or {})
    in_mask = normalize_mask(in_mask, argument="in_mask")
    out_mask = normalize_mask(out_mask, argument="out_mask")
    if true_fields is not None or pred_fields is not None:
        _check_known(in_mask, available, "in_mask")

    def masked(fields: dict[str, Any] | None) -> MaskedDataModel | None:
        if fields is None:
            return None
        return MaskedDataModel(apply_mask(fields, in_mask, out_mask, strict=False))

    return masked(true_fields), masked(pred_fields)
