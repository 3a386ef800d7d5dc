"""Few-shot examples that cover the label set (stratified sampling).

Why: on a label task a random draw of 1-3 examples often shows one label only, and a small
model then answers that label for every input (measured on the local 135M model: a 4-label
emotion task stuck at the majority share). When the Generator's output has a label field
(``Literal[...]``: an ``enum`` in its schema), its examples are drawn label by label, round
robin in a seeded random order of the labels, so ``n`` examples show ``min(n, labels)``
different labels. Within a label, the caller picks (uniformly for RandomFewShot, by OMEGA's
difficulty softmax).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from training.engine.data_model import label_choices


def label_fields(data_model: Any) -> dict[str, list[str]]:
    """{field name: its labels} for every label field (``Literal`` of strings) of a
    DataModel class, in field order; {} when it has none."""
    fields = getattr(data_model, "model_fields", None) or {}
    found = {}
    for name, info in fields.items():
        labels = label_choices(info.annotation)
        if labels:
            found[name] = labels
    return found


def module_of(program: Any, variable_name: str) -> Any:
    """The module that owns ``variable_name`` (``"<module>/<variable>"``), or None."""
    module_name = variable_name.rsplit("/", 1)[0]
    for module in getattr(program, "modules", None) or []:
        if module.name == module_name:
            return module
    return None


def output_labels(program: Any, variable_name: str) -> dict[str, list[str]]:
    """The label fields of the output of the module that owns ``variable_name``."""
    module = module_of(program, variable_name)
    return label_fields(getattr(module, "output_data_model", None))


def example_label(fields: Sequence[str]) -> Callable[[dict[str, Any]], str]:
    """A function giving an example's label (its label fields' values, as one key)."""
    names = list(fields)

    def label(example: dict[str, Any]) -> str:
        outputs = example.get("outputs") or {}
        return json.dumps([outputs.get(name) for name in names], ensure_ascii=False)

    return label


def balanced_indices(
    labels: Sequence[str],
    count: int,
    rng: random.Random,
    pick: Callable[[list[int]], int] | None = None,
) -> list[int]:
    """``count`` distinct indices of ``labels`` that cover the labels: one of each label in a
    seeded random order, then again, until ``count`` (or none are left).

    Args:
        labels: each pool example's label.
        count: how many to draw.
        rng: the optimizer's seeded generator (the same seed, the same draw).
        pick: chooses one index among a label's remaining ones (its position in that list);
            uniform when None.

    Example:
        >>> balanced_indices(["a", "a", "a", "b"], 2, random.Random(0))  # one "a", the "b"
        [1, 3]
    """
    groups: dict[str, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(label, []).append(index)
    order = sorted(groups)
    rng.shuffle(order)
    chosen: list[int] = []
    count = min(int(count), len(labels))
    while len(chosen) < count:
        for label in order:
            remaining = groups[label]
            if not remaining or len(chosen) >= count:
                continue
            position = rng.randrange(len(remaining)) if pick is None else pick(remaining)
            chosen.append(remaining.pop(position))
    return chosen


__all__ = ["balanced_indices", "example_label", "label_fields", "module_of", "output_labels"]
