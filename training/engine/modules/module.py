"""Module: the base of Generator, ChainOfThought and Program.

Awaiting a module on a symbolic value records a graph node (functional API); awaiting it on a
concrete DataModel runs it. A module's input schema is fixed by its first build: connecting it
later to a different schema is an error naming both, never a silent mismatch.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

from training.engine.data_model import DataModel, is_same_schema
from training.engine.symbolic import Node, SymbolicDataModel, is_symbolic
from training.engine.variables import Variable

_NAME_COUNTS: dict[str, int] = {}

#: Per-prediction list collecting (module, inputs, outputs) of every generation, so optimizers
#: can turn correct predictions into few-shot examples. None when nobody is listening.
TRACE: contextvars.ContextVar[list | None] = contextvars.ContextVar("synalinks_trace", default=None)


class SchemaMismatchError(ValueError):
    """Connected modules (or data) disagree about a schema."""


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def unique_name(base: str) -> str:
    count = _NAME_COUNTS.get(base, 0)
    _NAME_COUNTS[base] = count + 1
    return base if count == 0 else f"{base}_{count}"


def field_list(data_model: type[DataModel]) -> str:
    return ", ".join(data_model.model_fields) or "(no fields)"


class Module:
    """Base class of a program's steps, as Keras' ``Layer`` is of a model's.

    Subclasses implement ``build(input_data_models)``, ``call`` and
    ``compute_output_data_model``; a module owns the trainable variables it adds with
    ``add_variable`` (named ``<module name>/<variable>``), which the program gathers.

    Args:
        name: Unique module name (a snake-case name of the class with a counter when None).
        description: What the module is for (shown in summaries).
        trainable: Whether optimizers may change the module's variables.
    """

    def __init__(
        self, name: str | None = None, description: str | None = None, trainable: bool = True
    ):
        self.name = name or unique_name(snake_case(type(self).__name__))
        self.description = description or ""
        self.trainable = trainable
        self._variables: dict[str, Variable] = {}
        self.input_data_models: list[type[DataModel]] | None = None
        self.built = False

    # -- variables -------------------------------------------------------------------------
    def add_variable(
        self, name: str, initializer: dict, schema: dict | None, description: str
    ) -> Variable:
        variable = Variable(
            initializer=initializer,
            name=f"{self.name}/{name}",
            schema=schema,
            description=description,
            trainable=self.trainable,
        )
        self._variables[name] = variable
        return variable

    @property
    def variables(self) -> list[Variable]:
        return list(self._variables.values())

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if v.trainable]

    # -- graph -----------------------------------------------------------------------------
    def build(self, input_data_models: list[type[DataModel]]) -> None:
        self.input_data_models = list(input_data_models)
        self.built = True

    def _ensure_built(self, input_data_models: list[type[DataModel]]) -> None:
        if not self.built:
            self.build(input_data_models)
            return
        expected = self.input_data_models or []
        if len(expected) != len(input_data_models) or not all(
            is_same_schema(a, b) for a, b in zip(expected, input_data_models, strict=False)
        ):
            raise SchemaMismatchError(
                f"Module {self.name!r} was built for input "
                f"{[m.__name__ + '(' + field_list(m) + ')' for m in expected]} but is now "
                f"connected to {[m.__name__ + '(' + field_list(m) + ')' for m in input_data_models]}"
            )

    def compute_output_data_model(
        self, input_data_models: list[type[DataModel]]
    ) -> type[DataModel]:
        raise NotImplementedError

    def symbolic_call(self, inputs: Any) -> SymbolicDataModel:
        symbols = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        for symbol in symbols:
            if not isinstance(symbol, SymbolicDataModel):
                raise TypeError(
                    f"Module {self.name!r}: cannot mix symbolic and concrete inputs ({symbol!r})"
                )
        data_models = [symbol.data_model for symbol in symbols]
        self._ensure_built(data_models)
        node = Node(module=self, inputs=symbols)
        output = SymbolicDataModel(
            data_model=self.compute_output_data_model(data_models),
            node=node,
            name=f"{self.name}_output",
        )
        node.output = output
        return output

    async def __call__(self, inputs: Any, training: bool = False) -> Any:
        if is_symbolic(inputs):
            return self.symbolic_call(inputs)
        return await self.call(inputs, training=training)

    async def call(self, inputs: Any, training: bool = False) -> Any:  # pragma: no cover
        raise NotImplementedError

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "trainable": self.trainable}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
