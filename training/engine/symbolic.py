"""Symbolic data models: placeholders that record the graph in the functional API.

``inputs = Input(data_model=Query)`` is a symbolic value; awaiting a module on it returns
another symbolic value whose ``node`` remembers the module and its inputs. ``Program`` walks
those nodes back from its outputs to find the graph.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from training.engine.data_model import DataModel

_COUNTER = itertools.count()


@dataclass(eq=False)
class Node:
    """One module application: ``output = module(inputs)``."""

    module: Any
    inputs: list[SymbolicDataModel]
    output: SymbolicDataModel | None = None


@dataclass(eq=False)
class SymbolicDataModel:
    """A typed placeholder. ``node`` is None for program inputs."""

    data_model: type[DataModel]
    node: Node | None = None
    name: str = field(default_factory=lambda: f"input_{next(_COUNTER)}")

    def get_schema(self) -> dict[str, Any]:
        return self.data_model.get_schema()

    def __repr__(self) -> str:
        origin = f"from {self.node.module.name!r}" if self.node else "input"
        return f"<SymbolicDataModel {self.data_model.__name__} {origin}>"


def Input(
    data_model: type[DataModel] | None = None, schema: dict | None = None, name: str | None = None
):  # noqa: N802
    """A program input of class ``data_model`` (or rebuilt from a JSON ``schema``)."""
    if data_model is None:
        if schema is None:
            raise ValueError("Input() needs data_model=... (a DataModel class) or schema=...")
        from training.engine.data_model import data_model_from_schema

        data_model = data_model_from_schema(schema)
    if not (isinstance(data_model, type) and issubclass(data_model, DataModel)):
        raise TypeError(f"Input(data_model=...) expects a DataModel subclass, got {data_model!r}")
    symbol = SymbolicDataModel(data_model=data_model)
    if name:
        symbol.name = name
    return symbol


def is_symbolic(value: Any) -> bool:
    if isinstance(value, SymbolicDataModel):
        return True
    if isinstance(value, list | tuple):
        return any(isinstance(item, SymbolicDataModel) for item in value)
    return False
