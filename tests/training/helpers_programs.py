"""Helpers (no tests): a Program row over a dataset's schema, built as the dashboard's form
builds it. For the training tests (through conftest), ``helpers_eval_table`` and the benches
that run the worker's code in-process (``cancel_latency.py``, ``forecast_accuracy.py``)."""

from __future__ import annotations

from training.models import Program
from training.programs.programs import build_engine_program


def make_program(
    user,
    dataset,
    model="fake/fewshot",
    module="Generator",
    name="Router",
    instructions="Route it.",
    max_tokens=None,
):
    """A ``module`` program named ``name`` from ``dataset``'s input to its target fields, on
    ``model``: the engine document and the row's own fields agree, as after the form."""
    engine = build_engine_program(
        name=name,
        input_fields=dataset.input_schema_fields(),
        target_fields=dataset.target_schema_fields(),
        module=module,
        instructions=instructions,
        model=model,
        max_tokens=max_tokens,
    )
    return Program.objects.create(
        owner=user,
        name=name,
        dataset=dataset,
        module=module,
        instructions=instructions,
        model=model,
        max_tokens=max_tokens,
        engine_json=engine.get_config(),
    )
