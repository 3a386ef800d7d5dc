"""Variable: a named, trainable JSON object (e.g. a Generator's instructions and examples).

Optimizers read and write variables; each variable also keeps the candidates an optimizer
scored for it (value, reward, lineage), so the best one can be assigned at the end and the
dashboard can show the evolution. Values are validated against the variable's JSON schema.

``assigned(variables, values)`` gives variables other values for the current asyncio context
only (the task and the tasks it starts), not for the whole program: that is how an optimizer
scores several candidates at once while the fit goes on predicting with the real values.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from training.engine import schema_validation
from training.engine.saving import register_synalinks_serializable


class VariableError(ValueError):
    """A value does not fit its variable's schema, or variables don't match a saved file."""


class VariableMismatchError(VariableError):
    """Saved (or given) variables do not match the program's variables."""


@register_synalinks_serializable(package="synalinks")
class Variable:
    """A trainable JSON object with a schema and a description of what it is for.

    Args:
        initializer: the first value (a JSON object; None: ``{}``).
        name: the variable's name (``"generator/state"``), unique in its program.
        schema: the JSON schema every value must meet (None: any JSON object).
        description: what the variable is for, told to optimizers that rewrite it.
        trainable: whether optimizers may change it.
        data_model: a DataModel whose schema is used when ``schema`` is None.
        value: the value to start from, taking precedence over ``initializer`` (what a
            saved program restores).
    """

    def __init__(
        self,
        initializer: dict[str, Any] | None = None,
        name: str = "variable",
        schema: dict[str, Any] | None = None,
        description: str = "",
        trainable: bool = True,
        data_model: Any = None,
        value: dict[str, Any] | None = None,
    ):
        if data_model is not None and schema is None:
            schema = data_model.get_schema()
        self.name = name
        self.schema = schema
        self.description = description
        self.trainable = trainable
        self.candidates: list[dict[str, Any]] = []
        #: Few-shot examples a person pinned: every candidate an optimizer proposes keeps
        #: them (``with_pinned``), whatever it samples or mutates.
        self.pinned_examples: list[dict[str, Any]] = []
        self._value: dict[str, Any] = {}
        self._hash: str | None = None
        initial = value if value is not None else initializer
        self.assign(initial if initial is not None else {})

    # -- value -----------------------------------------------------------------------------
    @property
    def value(self) -> dict[str, Any]:
        scoped = _scoped(self)
        return self._value if scoped is None else scoped[0]

    def get_json(self) -> dict[str, Any]:
        return copy.deepcopy(self.value)

    def get(self, key: str, default: Any = None) -> Any:
        return self.value.get(key, default)

    def assign(self, value: dict[str, Any]) -> None:
        """Replace the value (validated against the schema; the variable keeps a copy)."""
        self._value = self.checked_copy(value)  # JSON only, and a private copy
        self._hash = None

    def _validate(self, value: dict[str, Any]) -> None:
        import jsonschema

        try:
            schema_validation.validate(value, self.schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "<root>"
            raise VariableError(
                f"Variable {self.name!r}: value does not match its schema at {where}: {exc.message}"
            ) from None

    @property
    def hash(self) -> str:
        """Content hash of the value (memo keys; cached until the next assign)."""
        scoped = _scoped(self)
        if scoped is not None:
            return scoped[1]
        if self._hash is None:
            self._hash = _content_hash(self._value)
        return self._hash

    # -- pinned examples -------------------------------------------------------------------
    def pin_examples(self, examples: list[dict[str, Any]]) -> None:
        """Pin few-shot examples: they stay in every value an optimizer proposes.

        Why: a person who found a demonstration that teaches the task (or fixes a failure)
        wants the search to go on around it, not to sample it away at the next epoch.

        Args:
            examples: ``[{"inputs": {...}, "outputs": {...}}]``; ``[]`` unpins all.

        Raises:
            VariableError: an example is not an ``{"inputs", "outputs"}`` object, or the
                variable's value has no ``examples`` list to keep them in.

        Example:

        ```python
        state = program.trainable_variables[0]
        state.pin_examples([{"inputs": {"text": "refund"}, "outputs": {"team": "billing"}}])
        state.with_pinned({"instructions": "", "examples": []})["examples"][0]["inputs"]
        # {'text': 'refund'}
        ```
        """
        examples = json.loads(json.dumps(list(examples or [])))
        for example in examples:
            if not isinstance(example, dict) or set(example) != {"inputs", "outputs"}:
                raise VariableError(
                    f"Variable {self.name!r}: a pinned example must be "
                    f'{{"inputs": ..., "outputs": ...}}, got {json.dumps(example)[:80]}'
                )
        if examples and not isinstance(self._value.get("examples"), list):
            raise VariableError(f"Variable {self.name!r} has no examples to pin")
        self.pinned_examples = examples

    def with_pinned(self, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` with the pinned examples first, then its other examples (an example with
        the same inputs as a pinned one is the pinned one). Unchanged without pins."""
        if not self.pinned_examples or not isinstance(value.get("examples"), list):
            return value
        pinned_inputs = [example["inputs"] for example in self.pinned_examples]
        others = [e for e in value["examples"] if e.get("inputs") not in pinned_inputs]
        return {**value, "examples": copy.deepcopy(self.pinned_examples) + others}

    def checked_copy(self, value: dict[str, Any]) -> dict[str, Any]:
        """A private JSON copy of ``value``, validated as ``assign`` would (nothing changes)."""
        if not isinstance(value, dict):
            raise VariableError(
                f"Variable {self.name!r}: value must be a JSON object, got {type(value).__name__}"
            )
        value = json.loads(json.dumps(value))
        if self.schema is not None:
            self._validate(value)
        return value

    # -- candidates ------------------------------------------------------------------------
    def add_candidate(self, candidate: dict[str, Any]) -> dict[str, Any]:
        self.candidates.append(candidate)
        return candidate

    def best_candidate(self) -> dict[str, Any] | None:
        """Highest reward; ties go to the earliest (so the starting value wins ties)."""
        scored = [c for c in self.candidates if c.get("reward") is not None]
        if not scored:
            return None
        return max(enumerate(scored), key=lambda pair: (pair[1]["reward"], -pair[0]))[1]

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        config = {
            "name": self.name,
            "value": self.get_json(),
            "schema": self.schema,
            "description": self.description,
            "trainable": self.trainable,
            "candidates": copy.deepcopy(self.candidates),
        }
        if self.pinned_examples:  # only when used: documents without pins stay as they were
            config["pinned_examples"] = copy.deepcopy(self.pinned_examples)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Variable:
        variable = cls(
            value=config.get("value", {}),
            name=config.get("name", "variable"),
            schema=config.get("schema"),
            description=config.get("description", ""),
            trainable=config.get("trainable", True),
        )
        variable.candidates = list(config.get("candidates", []))
        variable.pin_examples(config.get("pinned_examples") or [])
        return variable

    def __repr__(self) -> str:
        return f"Variable(name={self.name!r}, value={json.dumps(self._value)[:80]})"


#: {id(variable): (value, hash)} in force in the current asyncio context (see ``assigned``).
_SCOPED: contextvars.ContextVar[dict[int, tuple[dict[str, Any], str]] | None] = (
    contextvars.ContextVar("trainboard_scoped_variable_values", default=None)
)


def _scoped(variable: Variable) -> tuple[dict[str, Any], str] | None:
    scoped = _SCOPED.get()
    return None if scoped is None else scoped.get(id(variable))


def _content_hash(value: dict[str, Any]) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(canonical.encode()).hexdigest()[:16]


@contextlib.contextmanager
def assigned(variables: Iterable[Variable], values: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Give ``variables`` (matched by name) the ``values`` inside this block, for this asyncio
    context only: concurrent tasks each see their own values, and nothing is left behind.

    Raises VariableError for a name that is not among ``variables`` or a value that does not
    fit its schema (before anything changes).

    Example:
        ```python
        with assigned(program.variables, {"generator/state": candidate_value}):
            reward = await score()  # other tasks still see the program's own values
        ```
    """
    by_name = {variable.name: variable for variable in variables}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise VariableError(f"no variable named {unknown} (known: {sorted(by_name)})")
    scoped = dict(_SCOPED.get() or {})
    for name, value in values.items():
        checked = by_name[name].checked_copy(value)
        scoped[id(by_name[name])] = (checked, _content_hash(checked))
    token = _SCOPED.set(scoped)
    try:
        yield
    finally:
        _SCOPED.reset(token)
