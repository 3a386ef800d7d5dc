"""Program: a graph of modules from symbolic inputs to outputs, trainable and savable.

Built with the functional API (``Program(inputs=..., outputs=...)`` after awaiting modules on
``Input``) or with :class:`Sequential`. Saved as one JSON document — architecture (data model
schemas, module configs, graph), variables, and the compile/optimizer state — which is also what
``get_config()`` / ``to_json()`` return. Loading rebuilds DataModel classes from their schemas
and modules from registered names: nothing is imported or executed from the file.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from training.engine.data_adapter import as_object_array
from training.engine.data_model import DataModel, data_model_from_schema, schema_signature
from training.engine.modules.module import Module, SchemaMismatchError, field_list
from training.engine.saving import (
    UnknownObjectError,
    deserialize,
    read_json,
    register_synalinks_serializable,
    serialize,
    write_json,
)
from training.engine.symbolic import Input, Node, SymbolicDataModel
from training.engine.trainer import Trainer
from training.engine.variables import Variable, VariableError

logger = logging.getLogger(__name__)

FORMAT = "synalinks-program"
VARIABLES_FORMAT = "synalinks-variables"
VERSION = 1


class InputMismatchError(ValueError):
    """Data given to a program does not match its input (or target) data model."""


class VariableMismatchError(VariableError):
    """Saved variables do not match the program's variables."""


def _as_list(value: Any) -> list:
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


@register_synalinks_serializable(package="synalinks")
class Program(Trainer, Module):
    """``Program(inputs=inputs, outputs=outputs, name=None, description=None)``."""

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
        self._single_input = not isinstance(inputs, list | tuple)
        self._single_output = not isinstance(outputs, list | tuple)
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
        self._nodes = self._topological_nodes()
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
        for node in self._nodes:
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
        for node in self._nodes:
            args = [values[id(symbol)] for symbol in node.inputs]
            if any(arg is None for arg in args):
                output = None
            else:
                output = await node.module.call(
                    args[0] if len(args) == 1 else args, training=training
                )
            values[id(node.output)] = output
        results = [values[id(symbol)] for symbol in self.outputs]
        return results[0] if self._single_output else results

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
        if self._single_output and len(array):
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
        if y_item is None or not self._single_output or self.outputs[0].node is None:
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
        write_json(
            filepath,
            {
                "format": VARIABLES_FORMAT,
                "version": VERSION,
                "program": self.name,
                "variables": {variable.name: variable.get_config() for variable in self.variables},
            },
        )

    def load_variables(self, filepath: str) -> None:
        data = read_json(filepath)
        if isinstance(data, dict) and data.get("format") == FORMAT:
            saved = data.get("variables", {})
        elif isinstance(data, dict) and data.get("format") == VARIABLES_FORMAT:
            saved = data.get("variables", {})
        else:
            raise VariableMismatchError(f"{filepath} is not a saved program or variables file")
        self._apply_saved_variables(saved, str(filepath))

    def _apply_saved_variables(self, saved: dict[str, dict], source: str) -> None:
        by_name = {variable.name: variable for variable in self.variables}
        missing = sorted(set(by_name) - set(saved))
        unknown = sorted(set(saved) - set(by_name))
        if missing or unknown:
            raise VariableMismatchError(
                f"{source} does not match program {self.name!r}: it has {len(saved)} variable(s), the "
                f"program {len(by_name)}; missing in file: {missing}; not in program: {unknown}"
            )
        for name, config in saved.items():
            variable = by_name[name]
            if (
                variable.schema is not None
                and config.get("schema") is not None
                and (schema_signature(variable.schema) != schema_signature(config["schema"]))
            ):
                raise VariableMismatchError(
                    f"{source}: variable {name!r} has a different schema than in program "
                    f"{self.name!r} (the connected data models differ)"
                )
        for name, config in saved.items():
            try:
                by_name[name].assign(config.get("value", {}))
            except VariableError as exc:
                raise VariableMismatchError(f"{source}: {exc}") from None
            by_name[name].candidates = copy.deepcopy(config.get("candidates", []))

    # -- saving ----------------------------------------------------------------------------
    def _graph_config(self) -> dict[str, Any]:
        names: dict[int, str] = {}
        used: set[str] = set()
        inputs = []
        for index, symbol in enumerate(self.inputs):
            name = symbol.name if symbol.name not in used else f"input_{index}"
            used.add(name)
            names[id(symbol)] = name
            inputs.append({"name": name, "data_model": symbol.data_model.get_schema()})
        nodes = []
        for index, node in enumerate(self._nodes):
            output_name = f"{node.module.name}:{index}"
            names[id(node.output)] = output_name
            nodes.append(
                {
                    "module": node.module.name,
                    "inputs": [names[id(symbol)] for symbol in node.inputs],
                    "output": output_name,
                }
            )
        return {
            "inputs": inputs,
            "modules": [serialize(module) for module in self.modules],
            "nodes": nodes,
            "outputs": [names[id(symbol)] for symbol in self.outputs],
            "single_input": self._single_input,
            "single_output": self._single_output,
        }

    def _compile_config(self) -> dict[str, Any] | None:
        if not self.compiled:
            return None

        def safe(obj: Any, what: str) -> Any:
            try:
                return serialize(obj)
            except UnknownObjectError as exc:
                logger.warning("program %r: %s not saved: %s", self.name, what, exc)
                return None

        optimizer = None
        if self.optimizer is not None:
            optimizer = safe(self.optimizer, "optimizer")
            if optimizer is not None:
                optimizer["state"] = self.optimizer.get_state()
        return {
            "reward": safe(self.reward, "reward"),
            "metrics": [
                m for m in (safe(metric, "metric") for metric in self.metrics) if m is not None
            ],
            "optimizer": optimizer,
        }

    def get_config(self) -> dict[str, Any]:
        """The complete saved document (architecture + variables + compile/optimizer state)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "class_name": "synalinks>Program",
            "name": self.name,
            "description": self.description,
            "trainable": self.trainable,
            "graph": self._graph_config(),
            "variables": {variable.name: variable.get_config() for variable in self.variables},
            "compile": self._compile_config(),
            "history": self.history.to_dict() if self.history is not None else None,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.get_config(), indent=indent, ensure_ascii=False)

    def save(self, filepath: str) -> None:
        """Write the program as JSON (no pickle)."""
        write_json(filepath, self.get_config())

    @classmethod
    def load(
        cls, filepath: str, custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        return cls.from_config(read_json(filepath), custom_objects=custom_objects, compile=compile)

    @classmethod
    def from_json(
        cls, text: str, custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        return cls.from_config(json.loads(text), custom_objects=custom_objects, compile=compile)

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: dict | None = None, compile: bool = True
    ) -> Program:
        if not isinstance(config, dict) or config.get("format") != FORMAT:
            raise ValueError(
                "not a saved program (expected a JSON object with format 'synalinks-program')"
            )
        if config.get("version", 0) > VERSION:
            raise ValueError(
                f"saved program version {config.get('version')} is newer than supported {VERSION}"
            )
        graph = config["graph"]
        modules: dict[str, Module] = {}
        for module_config in graph["modules"]:
            module = deserialize(module_config, custom_objects)
            if not isinstance(module, Module):
                raise UnknownObjectError(f"{module_config.get('class_name')!r} is not a Module")
            modules[module.name] = module
        symbols: dict[str, SymbolicDataModel] = {}
        inputs = []
        for spec in graph["inputs"]:
            symbol = Input(data_model=data_model_from_schema(spec["data_model"]), name=spec["name"])
            symbols[spec["name"]] = symbol
            inputs.append(symbol)
        for node in graph["nodes"]:
            if node["module"] not in modules:
                raise ValueError(f"saved graph refers to unknown module {node['module']!r}")
            args = [symbols[name] for name in node["inputs"]]
            symbols[node["output"]] = modules[node["module"]].symbolic_call(
                args[0] if len(args) == 1 else args
            )
        outputs = [symbols[name] for name in graph["outputs"]]
        program = cls(
            inputs=inputs[0] if graph.get("single_input", True) else inputs,
            outputs=outputs[0] if graph.get("single_output", True) else outputs,
            name=config.get("name"),
            description=config.get("description"),
            trainable=config.get("trainable", True),
        )
        program._apply_saved_variables(
            config.get("variables", {}), f"program {config.get('name')!r}"
        )
        compile_config = config.get("compile")
        if compile and compile_config:
            optimizer = None
            if compile_config.get("optimizer"):
                optimizer_config = dict(compile_config["optimizer"])
                state = optimizer_config.pop("state", None)
                optimizer = deserialize(optimizer_config, custom_objects)
                if state:
                    optimizer.set_state(state)
            program.compile(
                reward=deserialize(compile_config.get("reward"), custom_objects),
                optimizer=optimizer,
                metrics=[deserialize(m, custom_objects) for m in compile_config.get("metrics", [])],
            )
        if config.get("history"):
            from training.engine.history import History

            program.history = History.from_dict(config["history"])
        return program

    # -- display ---------------------------------------------------------------------------
    def summary(self, print_fn: Any = print) -> str:
        lines = [f"Program: {self.name}" + (f" — {self.description}" if self.description else "")]
        header = f"{'Module (type)':<36}{'Inputs':<28}{'Output':<24}{'Variables':>9}"
        lines += ["=" * len(header), header, "=" * len(header)]
        for symbol in self.inputs:
            lines.append(
                f"{symbol.name + ' (Input)':<36}{'':<28}{symbol.data_model.__name__:<24}{0:>9}"
            )
        for node in self._nodes:
            ins = ", ".join(s.data_model.__name__ for s in node.inputs)
            lines.append(
                f"{node.module.name + ' (' + type(node.module).__name__ + ')':<36}{ins:<28}"
                f"{node.output.data_model.__name__:<24}{len(node.module.variables):>9}"
            )
        lines.append("=" * len(header))
        trainable = self.trainable_variables
        lines.append(f"Total variables: {len(self.variables)} (trainable: {len(trainable)})")
        for variable in trainable:
            value = variable.value
            lines.append(
                f"  {variable.name}: {len(value.get('instructions', '') or '')} chars of instructions, "
                f"{len(value.get('examples', []))} example(s)"
            )
        text = "\n".join(lines)
        if print_fn is not None:
            print_fn(text)
        return text


class Sequential(Program):
    """``Sequential([Input(data_model=Query), Generator(...), ...])``: a chain of modules."""

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
