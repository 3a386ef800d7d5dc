"""Few-shot examples written by hand.

A person edits an example of the candidate they start from, or adds one, as two JSON
objects: its ``inputs`` and its ``outputs``. Both are untrusted text: each is bounded before it
is read (the engine's ``MAX_BY_HAND_CHARS``, the most a value by hand may hold whole, so any
part of it too), decoded with no ``NaN``/``Infinity``, deep nesting or lone surrogates, and
checked against the data models of the module that owns the variable (its input and output
``DataModel``: field names, types, a label field's label set), so an example the program
could never have produced or read is refused with the field that is wrong, never stored.

Example:

    models = example_models(run, "generator/state")
    example = parse_example('{"message": "Refund?"}', '{"team": "money"}', models, "new example")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pydantic

from core.bounded_json import UnsafeJSON, lone_surrogate, refuse_constant
from training.engine.optimizers.label_balance import module_of
from training.engine.optimizers.optimizer import MAX_BY_HAND_CHARS
from training.models import Run
from training.programs.programs import ProgramError, program_from_json


class ExampleError(ValueError):
    """An example that cannot be used; the message names it and what is wrong."""


@dataclass
class ExampleModels:
    """The data models an example of one variable must fit (None: that side is not checked
    beyond being a JSON object, e.g. a module with several inputs)."""

    inputs: Any = None
    outputs: Any = None


def example_models(run: Run, variable: str) -> ExampleModels:
    """The input and output data models of the module that owns ``variable`` in the run's
    program; ExampleError when the program cannot be loaded here."""
    try:
        program = program_from_json(run.program.engine_json)
    except ProgramError as exc:
        raise ExampleError(f"The run's program cannot be loaded here: {exc}") from None
    module = module_of(program, variable)
    inputs = list(getattr(module, "input_data_models", None) or [])
    return ExampleModels(
        inputs=inputs[0] if len(inputs) == 1 else None,
        outputs=getattr(module, "output_data_model", None),
    )


def parse_example(
    inputs_text: str, outputs_text: str, models: ExampleModels, name: str
) -> dict[str, Any]:
    """``{"inputs", "outputs"}`` from the two JSON texts, each checked against its model (its
    fields in the model's order); ExampleError saying which of ``name``'s parts is wrong."""
    return {
        "inputs": _part(inputs_text, models.inputs, f"{name}'s inputs"),
        "outputs": _part(outputs_text, models.outputs, f"{name}'s outputs"),
    }


def _part(text: str, model: Any, what: str) -> dict[str, Any]:
    text = (text or "").strip()
    if not text:
        raise ExampleError(f"{what}: write a JSON object, e.g. {_example_of(model)}.")
    if len(text) > MAX_BY_HAND_CHARS:
        raise ExampleError(f"{what}: at most {MAX_BY_HAND_CHARS} characters, got {len(text)}.")
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, UnsafeJSON, RecursionError) as exc:
        raise ExampleError(f"{what}: not JSON we can read ({_reason(exc)}).") from None
    if lone_surrogate(value, text) is not None:
        raise ExampleError(f"{what}: holds a lone UTF-16 surrogate escape.")
    if not isinstance(value, dict):
        raise ExampleError(f"{what}: must be a JSON object, e.g. {_example_of(model)}.")
    if model is None:
        return value
    unknown = sorted(set(value) - set(model.model_fields))
    if unknown:
        raise ExampleError(
            f"{what}: no field {unknown[0]!r}; the fields are {', '.join(model.model_fields)}."
        )
    try:
        checked = model(**value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ())) or "?"
        raise ExampleError(f"{what}: {field}: {first.get('msg', 'invalid')}.") from None
    return checked.get_json()


def _reason(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return str(exc).split(":")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)


def _example_of(model: Any) -> str:
    if model is None:
        return '{"field": "value"}'
    return json.dumps({name: "…" for name in list(model.model_fields)[:3]}, ensure_ascii=False)


def as_text(part: Any) -> str:
    """An example's inputs or outputs as the form shows them (one line of JSON)."""
    return json.dumps(part, ensure_ascii=False)
