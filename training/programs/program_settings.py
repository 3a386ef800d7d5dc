"""What the program page shows of a program: every setting, and its fields.

Read from the engine program (what a run will actually use) with the stored row as the
fallback, so an imported program shows what its JSON says, not the form's defaults.
"""

from __future__ import annotations

from typing import Any

from training.engine.data_model import data_model_fields
from training.programs.programs import summarize


def settings_of(program: Any, engine_program: Any | None) -> list[tuple[str, str]]:
    """``[(setting, value)]`` in a fixed order; a setting the program leaves unset says so.

    Args:
        program: the ``training.Program`` row.
        engine_program: its engine program, or None when it cannot be built here.
    """
    summary = summarize(engine_program) if engine_program is not None else {}
    max_tokens = summary.get("max_tokens") or program.max_tokens
    temperature = summary.get("temperature", program.temperature)
    return [
        ("Module", summary.get("module") or program.module),
        ("Model", summary.get("model") or program.model),
        ("Endpoint", summary.get("endpoint") or "none (no saved endpoint)"),
        ("API base", summary.get("api_base") or program.api_base or "the provider's default"),
        ("Temperature", f"{float(temperature or 0.0):g}"),
        ("Max tokens", str(max_tokens) if max_tokens else "no cap (the model's default)"),
    ]


def fields_of(engine_program: Any) -> list[dict[str, Any]]:
    """The program's input and output fields: ``{"role", "model", "name", "type",
    "description", "choices"}``, inputs first; ``choices`` is the label set, or None."""
    rows = []
    for role, symbols in (("input", engine_program.inputs), ("output", engine_program.outputs)):
        for symbol in symbols:
            for spec in data_model_fields(symbol.data_model):
                rows.append(
                    {
                        "role": role,
                        "model": symbol.data_model.__name__,
                        "name": spec["name"],
                        "type": spec["type"],
                        "description": spec["description"],
                        "choices": spec.get("choices"),
                    }
                )
    return rows
