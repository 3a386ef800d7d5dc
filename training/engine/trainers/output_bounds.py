"""How long a prediction may be while fit scores it: a bound learnt from the training targets.

Why: an optimizer's candidate (a mutated instruction, a crossover) often makes a small model
ramble: "Explain the final answer step by step..." turns a two-character answer into a
hundred-token paragraph, on every validation example the candidate is scored on. Decoding is
what a fit's wall time is made of, and those tokens buy nothing: a prediction far longer than
every target in the training data scores as badly at its first few dozen characters as at its
last. So while fit runs, each top-level string field of the program's outputs that the targets
fill is held to ``OUTPUT_LENGTH_FACTOR`` times the longest target value of that field (never
under ``MIN_OUTPUT_CHARS``), as a ``maxLength`` in the schema sent to the model.

What it changes, and what not:

- Only inside ``fit`` (train steps, candidate scoring, validation), only the trained program's
  own modules (never an optimizer's mutation or a judge's calls), only fields the targets have.
  ``evaluate`` and ``predict`` are never bounded, so test rewards are measured on the program
  as a user runs it.
- An exact-match reward gives every bounded prediction the reward it would have had: a
  prediction longer than the bound is longer than every target, so it matched none of them
  before the bound either. A similarity reward can differ only on predictions already more than
  ``OUTPUT_LENGTH_FACTOR`` times longer than the longest target.
- Only a model whose generation is held to the schema (``LanguageModel.holds_to_schema``: the
  local model's grammar, token by token) is bounded: a provider that may ignore ``maxLength``
  would fail a longer answer's validation and retry it, costing calls instead of tokens.

Example:

```python
bounds = output_bounds.from_targets(y_train)     # {"answer": 32}
with output_bounds.bounding(program.modules, bounds):
    ...                                          # the program's generators are bounded here
```
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from training.engine.data_model import DataModel, data_model_from_schema

#: A bounded field may hold this many times the characters of its longest training target.
OUTPUT_LENGTH_FACTOR = 2
#: ...and never fewer than this many (room for a short answer's variants: "72" vs "$72.00").
MIN_OUTPUT_CHARS = 32


@dataclass(frozen=True)
class OutputBounds:
    """Per-field character bounds that hold for some modules only (by identity)."""

    fields: tuple[tuple[str, int], ...]
    modules: frozenset[int]


_BOUNDS: ContextVar[OutputBounds | None] = ContextVar("trainboard_output_bounds", default=None)


def from_targets(targets: Iterable[Any]) -> dict[str, int]:
    """``{field: bound}`` for every string field the targets fill (top level only).

    Args:
        targets: target DataModels (or JSON dicts), e.g. fit's ``y``.

    Returns:
        Each field's bound: ``max(MIN_OUTPUT_CHARS, OUTPUT_LENGTH_FACTOR × longest value)``;
        a field that is ever a non-string (or missing) is left out.
    """
    longest: dict[str, int] = {}
    refused: set[str] = set()
    for target in targets:
        values = target.get_json() if hasattr(target, "get_json") else target
        if not isinstance(values, dict):
            return {}
        for field, value in values.items():
            if isinstance(value, str):
                longest[field] = max(longest.get(field, 0), len(value))
            else:
                refused.add(field)
    return {
        field: max(MIN_OUTPUT_CHARS, OUTPUT_LENGTH_FACTOR * length)
        for field, length in longest.items()
        if field not in refused
    }


@contextlib.contextmanager
def bounding(modules: Iterable[Any], bounds: dict[str, int]) -> Iterator[None]:
    """Within this block (and the tasks it starts), ``modules`` (and the modules of a nested
    program among them) are held to ``bounds``."""
    token = _BOUNDS.set(
        OutputBounds(tuple(sorted(bounds.items())), frozenset(_module_ids(modules)))
        if bounds
        else None
    )
    try:
        yield
    finally:
        _BOUNDS.reset(token)


def _module_ids(modules: Iterable[Any]) -> Iterator[int]:
    for module in modules:
        yield id(module)
        yield from _module_ids(getattr(module, "modules", None) or [])


def bounded(module: Any, data_model: type[DataModel]) -> type[DataModel]:
    """``data_model`` as ``module`` must produce it here: with the bounds of the enclosing
    ``bounding`` block on its string fields, or unchanged."""
    bounds = _BOUNDS.get()
    if bounds is None or id(module) not in bounds.modules:
        return data_model
    if not getattr(getattr(module, "language_model", None), "holds_to_schema", False):
        # a provider that may ignore maxLength would fail the longer answer's validation
        # (and retry it): the bound would cost calls instead of saving tokens
        return data_model
    return _bound_model(data_model, bounds.fields)


@functools.lru_cache(maxsize=256)
def _bound_model(
    data_model: type[DataModel], fields: tuple[tuple[str, int], ...]
) -> type[DataModel]:
    """The bounded copy of ``data_model`` (built once per model and bounds)."""
    schema = copy.deepcopy(data_model.get_schema())
    properties = schema.get("properties") or {}
    changed = False
    for field, limit in fields:
        spec = properties.get(field)
        if not isinstance(spec, dict) or spec.get("type") != "string" or "enum" in spec:
            continue
        if spec.get("maxLength", limit + 1) > limit and spec.get("minLength", 0) <= limit:
            spec["maxLength"] = limit
            changed = True
    if not changed:
        return data_model
    try:
        return data_model_from_schema(schema, name=data_model.__name__)
    except ValueError:  # a schema the rebuild does not cover: predictions stay unbounded
        return data_model
