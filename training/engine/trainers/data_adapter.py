"""Turning what ``fit`` / ``evaluate`` / ``predict`` are given into lists the trainer batches.

- :func:`as_object_array`: a numpy object array (or list) of DataModels, checked.
- :func:`prepare_fit_data`: ``fit``'s x / y checked against the program, the selection set
  cut off the end by ``selection_split`` (an extension of the guide: held out from training
  and validation alike), then the validation set taken from ``validation_data`` or cut off the
  end of what remains by ``validation_split``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.engine import bounds


def as_object_array(data: Any, name: str) -> np.ndarray:
    """``data`` as a numpy object array, one DataModel (or row) per item.

    Args:
        data: a numpy array, or a list / tuple of items.
        name: what the caller calls it (``"x"``, ``"validation_data y"``), for errors.

    Returns:
        A 1-D numpy array (``dtype=object`` when built from a list).

    Raises:
        ValueError: ``data`` is None.
        TypeError: ``data`` is neither an array nor a list / tuple.
    """
    if data is None:
        raise ValueError(f"{name} is required")
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, list | tuple):
        array = np.empty(len(data), dtype=object)
        for index, item in enumerate(data):
            array[index] = item
        return array
    raise TypeError(
        f"{name} must be a numpy object array (or a list) of DataModels, got {type(data).__name__}"
    )


@dataclass
class FitData:
    """The training and validation examples of one ``fit``, checked against the program."""

    x: list
    y: list
    val_x: list
    val_y: list
    sel_x: list = field(default_factory=list)
    sel_y: list = field(default_factory=list)

    @property
    def scoring_set(self) -> tuple[list, list]:
        """What the optimizer scores candidates on: the validation set when there is one."""
        return (self.val_x, self.val_y) if self.val_x else (self.x, self.y)


def check_fit_arguments(
    validation_split: float, epochs: int, initial_epoch: int, selection_split: float = 0.0
) -> None:
    """Reject a ``validation_split``, ``selection_split`` or ``epochs`` outside their bounds
    (``bounds.py``) and an ``initial_epoch`` outside ``0..epochs``."""
    bounds.VALIDATION_SPLIT.check("validation_split", validation_split)
    bounds.SELECTION_SPLIT.check("selection_split", selection_split)
    bounds.EPOCHS.check("epochs", epochs)
    if not 0 <= initial_epoch <= epochs:
        raise ValueError(f"need 0 <= initial_epoch <= epochs (got {initial_epoch}, {epochs})")


def _cut(items: list, targets: list, fraction: float, what: str) -> tuple[list, ...]:
    """(kept items, kept targets, cut items, cut targets): ``fraction`` of the rows, from the end."""
    cut = len(items) - int(round(len(items) * fraction))
    if cut <= 0 or cut >= len(items):
        raise ValueError(
            f"{what}={fraction} leaves no training or no {what.split('_')[0]} data out of "
            f"{len(items)} examples"
        )
    return items[:cut], targets[:cut], items[cut:], targets[cut:]


def scoring_positions(
    count: int, validation_split: float, selection_split: float = 0.0
) -> list[int]:
    """The positions, among ``count`` training examples given to ``fit`` without
    ``validation_data``, of those the optimizer scores candidates on: the validation cut
    (``prepare_fit_data``'s), or the training examples themselves without one. What lets a
    stored candidate scoring be matched to its rows again.

    Example:
        >>> scoring_positions(10, 0.2)
        [8, 9]
    """
    positions = list(range(count))
    if selection_split > 0:
        positions = positions[: len(positions) - int(round(len(positions) * selection_split))]
    if validation_split > 0:
        return positions[len(positions) - int(round(len(positions) * validation_split)) :]
    return positions


def prepare_fit_data(
    program: Any,
    x: Any,
    y: Any,
    validation_split: float,
    validation_data: tuple | None,
    selection_split: float = 0.0,
) -> FitData:
    """Check ``fit``'s data against ``program`` and set the validation examples apart.

    Args:
        program: gives ``prepare_inputs(x, name)`` / ``prepare_targets(y, count, name)``.
        x: the training inputs.
        y: the training targets.
        validation_split: the fraction of (x, y), taken from the end, kept for validation
            (ignored when ``validation_data`` is given).
        validation_data: ``(x_val, y_val)``, or None.
        selection_split: the fraction of (x, y), taken from the end first, held out from
            training and validation: after fit the final program is the best on it among the
            top validation candidates (``optimizers/final_selection.py``).

    Returns:
        A :class:`FitData`.

    Raises:
        ValueError: malformed ``validation_data``, a split that leaves either side empty, or no
            training data.
    """
    items = program.prepare_inputs(x, "x")
    targets = program.prepare_targets(y, len(items))
    sel_items: list = []
    sel_targets: list = []
    if selection_split > 0:
        items, targets, sel_items, sel_targets = _cut(
            items, targets, selection_split, "selection_split"
        )
    if validation_data is not None:
        if not isinstance(validation_data, list | tuple) or len(validation_data) != 2:
            raise ValueError("validation_data must be a tuple (x_val, y_val)")
        val_items = program.prepare_inputs(validation_data[0], "validation_data x")
        val_targets = program.prepare_targets(
            validation_data[1], len(val_items), "validation_data y"
        )
    elif validation_split > 0:
        items, targets, val_items, val_targets = _cut(
            items, targets, validation_split, "validation_split"
        )
    else:
        val_items, val_targets = [], []
    if not items:
        raise ValueError("fit(): no training data")
    return FitData(
        x=items, y=targets, val_x=val_items, val_y=val_targets, sel_x=sel_items, sel_y=sel_targets
    )
