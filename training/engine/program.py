"""Program: a graph of modules from symbolic inputs to outputs, trainable and savable.

Built with the functional API (``Program(inputs=..., outputs=...)`` after awaiting modules on
``Input``) or with :class:`Sequential`. Saved as one JSON document — architecture (data model
schemas, module configs, graph), variables, and the compile/optimizer state — which is also what
``get_config()`` / ``to_json()`` return. Loading rebuilds DataModel classes from their schemas
and modules from registered names: nothing is imported or executed from the file.
"""

from __future__ import annotations

import json
from typing import Any

from training.engine.data_model import DataModel, schema_signature
from training.engine.modules.module import Module, SchemaMismatchError, field_list
from training.engine.saving import program_saving, register_synalinks_serializable
from training.engine.symbolic import Node, SymbolicDataModel
from training.engine.trainers.data_adapter import as_object_array
from training.engine.trainers.trainer import Trainer
from training.engine.utils.summary import program_summary
from training.engine.variables import Variable, VariableMismatchError

#: Re-exported: the saved-document constants and the variables error long lived here.
FORMAT = program_saving.FORMAT
VARIABLES_FORMAT = program_saving.VARIABLES_FORMAT
VERSION = program_saving.VERSION
__all__ = ["InputMismatchError", "Program", "Sequential", "VariableMismatchError"]


class InputMismatchError(ValueError):
    """Data given to a program does not match its input (or target) data model."""


def _as_list(value: Any) -> list:
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


@register_synalinks_serializable(package="synalinks")
class Program(Trainer, Module):
    """A graph of modules from symbolic inputs to outputs: callable, trainable, savable.

    Built with the functional API: await modules on an ``Input`` to get symbolic outputs, then
    wrap inputs and outputs. Training (``compile`` / ``fit`` / ``evaluate`` / ``predict``)
    comes from :class:`~training.engine.trainers.trainer.Trainer`; saving from
    :mod:`training.engine.saving.program_saving`.

    Args:
        inputs: an ``Input(...)`` symbol, or a list of them.
        outputs: the symbolic output of an awaited module, or a list of them.
        name: the program's name (unique module names are required inside it).
        description: what the program does.
        trainable: whether ``fit`` may change its variables.

    Returns:
        Calling it, ``await program(x)`` returns the output DataModel (``None`` when a module
        upstream produced none).

    Example:

    ```python
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(
        data_model=Answer, language_model=language_model
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="qa")
    answer = await program(Query(query="What is 2 + 2?"))
    ```
    """

    def __init__(
        self,
        inputs: Any = None,
        outputs: Any = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ):
        Module.__init__(self, name=name, description=description, trainable=trainable)
        self._init_trainer()
        if inputs is None or outputs is None:
            raise ValueError(
                "Program(inputs=..., outputs=...) needs both (use Sequential for a chain)"
            )
        self.single_input = not isinstance(inputs, list | tuple)
        self.single_output = not isinstance(outputs, list | tuple)
        self.inputs: list[SymbolicDataModel] = _as_list(inputs)
        self.outputs: list[SymbolicDataModel] = _as_list(outputs)
        for symbol in self.inputs + self.outputs:
            if not isinstance(symbol, SymbolicDataModel):
                raise TypeError(
                    f"Program {self.name!r}: inputs and outputs must be symbolic (from Input(...) "
                    f"and awaited modules), got {symbol!r}"
                )
        for symbol in self.inputs:
            if symbol.node is not None:
                raise ValueError(f"Program {self.name!r}: {symbol!r} is not an Input(...)")
        self.nodes = self._topological_nodes()
        self.modules = self._unique_modules()
        self.input_data_models = [symbol.data_model for symbol in self.inputs]
        self.built = True
        self._input_signatures: dict[type, bool] = {}
        self.history = None

    # -- graph -----------------------------------------------------------------------------
    def _topological_nodes(self) -> list[Node]:
        order: list[Node] = []
        seen: set[int] = set()
        input_ids = {id(symbol) for symbol in self.inputs}

        def visit(symbol: SymbolicDataModel, path: tuple) -> None:
            if symbol.node is None:
                if id(symbol) not in input_ids:
                    raise ValueError(
                        f"Program {self.name!r}: the outputs depend on {symbol!r} "
                        f"({symbol.data_model.__name__}) which is not among its inputs"
                    )
                return
            node = symbol.node
            if id(node) in seen:
                return
            for parent in node.inputs:
                visit(parent, path + (node.module.name,))
            seen.add(id(node))
            order.append(node)

        for output in self.outputs:
            visit(output, ())
        return order

    def _unique_modules(self) -> list[Module]:
        modules: list[Module] = []
        names: dict[str, Module] = {}
        for node in self.nodes:
            module = node.module
            if module.name in names and names[module.name] is not module:
                raise ValueError(
                    f"Program {self.name!r}: two different modules are named {module.name!r}; "
                    "give them distinct name=... (variables are saved by module name)"
                )
            if module.name not in names:
                names[module.name] = module
                modules.append(module)
        return modules

    def compute_output_data_model(self, input_data_models: list) -> type[DataModel]:
        return self.outputs[0].data_model

    @property
    def variables(self) -> list[Variable]:
        return [variable for module in self.modules for variable in module.variables]

    @property
    def trainable_variables(self) -> list[Variable]:
        return [
            variable
            for module in self.modules
            if module.trainable
            for variable in module.trainable_variables
        ]

    # -- running ---------------------------------------------------------------------------
    async def call(self, inputs: Any, training: bool = False) -> Any:
        values: dict[int, Any] = {}
        if len(self.inputs) == 1:
            values[id(self.inputs[0])] = inputs[0] if isinstance(inputs, list | tuple) else inputs
        else:
            for symbol, value in zip(self.inputs, inputs, strict=True):
                values[id(symbol)] = value
        for node in self.nodes:
            args = [values[id(symbol)] for symbol in node.inputs]
            if any(arg is None for arg in args):
                output = None
            else:
                output = await node.module.call(
                    args[0] if len(args) == 1 else args, training=training
                )
            values[id(node.output)] = output
        results = [values[id(symbol)] for symbol in self.outputs]
        return results[0] if self.single_output else results

    # -- data checks -----------------------------------------------------------------------
    def _coerce(self, item: Any, expected: type[DataModel], where: str) -> DataModel:
        if type(item) is expected:
            return item
        if isinstance(item, DataModel):
            cls = type(item)
            same = self._input_signatures.get((cls, expected))
            if same is None:
                same = schema_signature(cls.get_schema()) == schema_signature(expected.get_schema())
                self._input_signatures[(cls, expected)] = same
            if same:
                return item
            raise InputMismatchError(
                f"{where} is a {cls.__name__} (fields: {field_list(cls)}) but program {self.name!r} "
                f"expects {expected.__name__} (fields: {field_list(expected)})"
            )
        if isinstance(item, dict):
            try:
                return expected.model_validate(item)
            except Exception as exc:
                raise InputMismatchError(
                    f"{where} does not fit {expected.__name__} (fields: {field_list(expected)}) "
                    f"expected by program {self.name!r}: {exc}"
                ) from None
        raise InputMismatchError(
            f"{where} must be a {expected.__name__} DataModel, got {type(item).__name__}: {item!r:.80}"
        )

    def prepare_inputs(self, x: Any, name: str = "x") -> list:
        if len(self.inputs) == 1:
            array = as_object_array(x, name)
            expected = self.inputs[0].data_model
            return [self._coerce(item, expected, f"{name}[{i}]") for i, item in enumerate(array)]
        if not isinstance(x, list | tuple) or len(x) != len(self.inputs):
            raise InputMismatchError(
                f"program {self.name!r} has {len(self.inputs)} inputs: pass {name} as a list of "
                f"{len(self.inputs)} arrays"
            )
        columns = [
            [
                self._coerce(item, symbol.data_model, f"{name}[{k}][{i}]")
                for i, item in enumerate(as_object_array(col, name))
            ]
            for k, (col, symbol) in enumerate(zip(x, self.inputs, strict=True))
        ]
        if len({len(col) for col in columns}) != 1:
            raise InputMismatchError(f"{name}: the input arrays have different lengths")
        return [list(row) for row in zip(*columns, strict=True)]

    def prepare_targets(self, y: Any, count: int, name: str = "y") -> list:
        array = as_object_array(y, name)
        if len(array) != count:
            raise InputMismatchError(f"{name} has {len(array)} items but x has {count}")
        for index, item in enumerate(array):
            if not isinstance(item, DataModel):
                raise InputMismatchError(
                    f"{name}[{index}] must be a DataModel, got {type(item).__name__}"
                )
        if self.single_output and len(array):
            fields = set(self.outputs[0].data_model.model_fields)
            missing = set(type(array[0]).model_fields) - fields
            if missing:
                raise InputMismatchError(
                    f"{name}[0] ({type(array[0]).__name__}) has fields {sorted(missing)} that the "
                    f"program's output {self.outputs[0].data_model.__name__} "
                    f"({field_list(self.outputs[0].data_model)}) does not have"
                )
        return list(array)

    def ground_truth_examples(
        self, x_item: Any, y_item: Any, trace: list[dict]
    ) -> list[tuple[str, dict]]:
        """(module name, example) pairs where the ground truth is a valid output demonstration."""
        examples = []
        if y_item is None or not self.single_output or self.outputs[0].node is None:
            return examples
        node = self.outputs[0].node
        module = node.module
        output_model = getattr(module, "output_data_model", None)
        if output_model is None:
            return examples
        try:
            outputs = output_model.model_validate(y_item.get_json(), strict=True).get_json()
        except Exception:
            return examples  # e.g. ChainOfThought: the ground truth has no `thinking`
        inputs = next(
            (step["inputs"] for step in reversed(trace) if step["module"] == module.name), None
        )
        if inputs is None and all(symbol.node is None for symbol in node.inputs):
            items = x_item if isinstance(x_item, list) else [x_item]
            inputs = {}
            for item in items:
                inputs.update(item.get_json())
        if inputs is not None:
            examples.append((module.name, {"inputs": inputs, "outputs": outputs}))
        return examples

    # -- variables -------------------------------------------------------------------------
    def get_variables(self) -> dict[str, dict[str, Any]]:
        return {variable.name: variable.get_json() for variable in self.variables}

    def set_variables(self, values: dict[str, dict[str, Any]], partial: bool = False) -> None:
        by_name = {variable.name: variable for variable in self.variables}
        unknown = sorted(set(values) - set(by_name))
        missing = sorted(set(by_name) - set(values))
        if unknown or (missing and not partial):
            raise VariableMismatchError(
                f"program {self.name!r}: variables do not match (unknown: {unknown}, missing: {missing})"
            )
        for name, value in values.items():
            by_name[name].assign(value)

    def save_variables(self, filepath: str) -> None:
        """Write only the variables (values and candidates) as JSON."""
        program_saving.save_variables(self, filepath)

    def load_variables(self, filepath: str) -> None:
        """Assign the variables saved by ``save_variables`` (or ``save``) in ``filepath``."""
        program_saving.load_variables(self, filepath)

    # -- saving (training.engine.saving.program_saving) ------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The complete saved document (architecture + variables + compile/optimizer state)."""
        return program_saving.program_config(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.get_config(), indent=indent, ensure_ascii=False)

    def save(self, filepath: str) -> None:
        """Write the program as JSON (no pickle)."""
        program_saving.save_program(self, filepath)

    @classmethod
    def load(
        cls, filepath: str, custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        """Read a program written by :meth:`save`; nothing in the file is imported or run."""
        return program_saving.load_program(cls, filepath, custom_objects, compile)

    @classmethod
    def from_json(
        cls, text: str, custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        return cls.from_config(json.loads(text), custom_objects=custom_objects, compile=compile)

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        return program_saving.program_from_config(cls, config, custom_objects, compile)

    # -- display ---------------------------------------------------------------------------
    def summary(self, print_fn: Any = print) -> str:
        """Print (with ``print_fn``; ``None``: don't) and return the program's summary table."""
        return program_summary(self, print_fn)


class Sequential(Program):
    """A program whose modules form a chain, each fed the previous one's output.

    Args:
        layers: an ``Input(data_model=...)`` followed by at least one module.
        name: the program's name.
        description: what the program does.
        trainable: whether ``fit`` may change its variables.

    Returns:
        A :class:`Program` (same training, saving and summary).

    Example:

    ```python
    program = synalinks.Sequential(
        [
            synalinks.Input(data_model=Query),
            synalinks.Generator(data_model=Answer, language_model=language_model),
        ],
        name="chain",
    )
    ```
    """

    def __init__(
        self,
        layers: list | None = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ):
        layers = list(layers or [])
        if len(layers) < 2 or not isinstance(layers[0], SymbolicDataModel):
            raise ValueError(
                "Sequential([...]) needs an Input(data_model=...) followed by at least one module"
            )
        current = layers[0]
        for layer in layers[1:]:
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: {layer!r} is not a module")
            try:
                current = layer.symbolic_call(current)
            except SchemaMismatchError as exc:
                raise SchemaMismatchError(f"Sequential: {exc}") from None
        super().__init__(
            inputs=layers[0],
            outputs=current,
            name=name,
            description=description,
            trainable=trainable,
        )
