"""Saving and loading a Program as one JSON document, and its variables alone.

The document holds the architecture (data model schemas, module configs, the graph), the
variables (values and scored candidates) and the compile / optimizer state; it is what
``Program.get_config()`` / ``to_json()`` return and what the dashboard stores. Loading rebuilds
DataModel classes from their schemas and modules from registered names: nothing is imported or
executed from the file.

Not imported by ``training.engine.saving`` itself (modules register themselves through that
package, and this module needs them): ``Program`` imports it.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from training.engine.data_model import data_model_from_schema, schema_signature
from training.engine.modules.module import Module
from training.engine.saving.json_io import read_json, write_json
from training.engine.saving.registry import UnknownObjectError
from training.engine.saving.serialization import deserialize, serialize
from training.engine.symbolic import Input, SymbolicDataModel
from training.engine.variables import VariableError, VariableMismatchError

logger = logging.getLogger("training.engine.program")

FORMAT = "synalinks-program"
VARIABLES_FORMAT = "synalinks-variables"
VERSION = 1


def program_config(program: Any) -> dict[str, Any]:
    """The complete saved document (architecture + variables + compile/optimizer state)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "class_name": "synalinks>Program",
        "name": program.name,
        "description": program.description,
        "trainable": program.trainable,
        "graph": _graph_config(program),
        "variables": {variable.name: variable.get_config() for variable in program.variables},
        "compile": _compile_config(program),
        "history": program.history.to_dict() if program.history is not None else None,
    }


def _graph_config(program: Any) -> dict[str, Any]:
    names: dict[int, str] = {}
    used: set[str] = set()
    inputs = []
    for index, symbol in enumerate(program.inputs):
        name = symbol.name if symbol.name not in used else f"input_{index}"
        used.add(name)
        names[id(symbol)] = name
        inputs.append({"name": name, "data_model": symbol.data_model.get_schema()})
    nodes = []
    for index, node in enumerate(program.nodes):
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
        "modules": [serialize(module) for module in program.modules],
        "nodes": nodes,
        "outputs": [names[id(symbol)] for symbol in program.outputs],
        "single_input": program.single_input,
        "single_output": program.single_output,
    }


def _compile_config(program: Any) -> dict[str, Any] | None:
    if not program.compiled:
        return None

    def safe(obj: Any, what: str) -> Any:
        try:
            return serialize(obj)
        except UnknownObjectError as exc:
            logger.warning("program %r: %s not saved: %s", program.name, what, exc)
            return None

    optimizer = None
    if program.optimizer is not None:
        optimizer = safe(program.optimizer, "optimizer")
        if optimizer is not None:
            optimizer["state"] = program.optimizer.get_state()
    return {
        "reward": safe(program.reward, "reward"),
        "metrics": [
            m for m in (safe(metric, "metric") for metric in program.metrics) if m is not None
        ],
        "optimizer": optimizer,
    }


def program_from_config(
    cls: type, config: dict[str, Any], custom_objects: dict | None = None, compile: bool = True
) -> Any:
    """Rebuild a program of class ``cls`` from :func:`program_config`'s document.

    Args:
        cls: ``Program`` (or a subclass).
        config: the saved document.
        custom_objects: ``{"package>Name": class}`` for objects not registered globally.
        compile: restore the reward, metrics and optimizer (with its state) when saved.

    Returns:
        The program, its variables (and history) restored.

    Raises:
        ValueError: not a saved program, a newer format version, or a broken graph.
        UnknownObjectError: a module, reward, metric or optimizer name nobody registered.
        VariableMismatchError: the saved variables do not fit the rebuilt graph.
    """
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
    apply_saved_variables(program, config.get("variables", {}), f"program {config.get('name')!r}")
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
        from training.engine.trainers.history import History

        program.history = History.from_dict(config["history"])
    return program


def save_program(program: Any, filepath: str) -> None:
    """Write :func:`program_config` to ``filepath`` as JSON (no pickle)."""
    write_json(filepath, program_config(program))


def load_program(
    cls: type, filepath: str, custom_objects: dict | None = None, compile: bool = True
) -> Any:
    """Read a program saved by :func:`save_program` (see :func:`program_from_config`)."""
    return program_from_config(cls, read_json(filepath), custom_objects, compile)


def save_variables(program: Any, filepath: str) -> None:
    """Write only the program's variables (values and candidates) to ``filepath``."""
    write_json(
        filepath,
        {
            "format": VARIABLES_FORMAT,
            "version": VERSION,
            "program": program.name,
            "variables": {variable.name: variable.get_config() for variable in program.variables},
        },
    )


def load_variables(program: Any, filepath: str) -> None:
    """Assign the variables saved in ``filepath`` (a variables file or a whole program)."""
    data = read_json(filepath)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        saved = data.get("variables", {})
    elif isinstance(data, dict) and data.get("format") == VARIABLES_FORMAT:
        saved = data.get("variables", {})
    else:
        raise VariableMismatchError(f"{filepath} is not a saved program or variables file")
    apply_saved_variables(program, saved, str(filepath))


def apply_saved_variables(program: Any, saved: dict[str, dict], source: str) -> None:
    """Assign saved variable configs (value and candidates) to ``program``'s variables.

    Every name must match and every schema must agree before any value is assigned, so a file
    saved from another program leaves this one as it was.

    Raises:
        VariableMismatchError: names or schemas differ, or a value does not fit its schema.
    """
    by_name = {variable.name: variable for variable in program.variables}
    missing = sorted(set(by_name) - set(saved))
    unknown = sorted(set(saved) - set(by_name))
    if missing or unknown:
        raise VariableMismatchError(
            f"{source} does not match program {program.name!r}: it has {len(saved)} variable(s), "
            f"the program {len(by_name)}; missing in file: {missing}; not in program: {unknown}"
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
                f"{program.name!r} (the connected data models differ)"
            )
    for name, config in saved.items():
        try:
            by_name[name].assign(config.get("value", {}))
        except VariableError as exc:
            raise VariableMismatchError(f"{source}: {exc}") from None
        by_name[name].candidates = copy.deepcopy(config.get("candidates", []))
        try:
            by_name[name].pin_examples(config.get("pinned_examples") or [])
        except VariableError as exc:
            raise VariableMismatchError(f"{source}: {exc}") from None
