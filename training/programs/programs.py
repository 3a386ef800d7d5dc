"""Build, import and export engine programs, and save them as Program rows.

A program built in the dashboard is ``Sequential([Input(<dataset inputs>), Generator or
ChainOfThought(<dataset targets>, instructions, LM)])``; its engine JSON (``get_config``) is
what the Program row stores, what the worker loads, and what "Export" downloads — so it is
exactly the document ``Program.load`` reads in code.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import training.engine as synalinks
from core.bounded_json import (
    UnsafeJSON,
    describe_surrogate,
    lone_surrogate,
    nesting_depth_exceeds,
    non_finite_path,
    refuse_constant,
)
from training.engine.data_model import create_data_model
from training.models import Program
from training.programs.lm import (
    ModelStringError,
    check_model_config,
    make_language_model,
    may_reach_private,
)
from training.programs.lm import missing_keys as lm_missing_keys
from training.programs.model_nodes import model_nodes

MODULES = {"Generator": synalinks.Generator, "ChainOfThought": synalinks.ChainOfThought}
IMPORT_MAX_BYTES = 5 * 1024 * 1024
#: The longest name and description an imported document may carry (the program row's name
#: column holds 200 characters; a description is read on a page, not a document).
NAME_MAX_CHARS = 200
DESCRIPTION_MAX_CHARS = 5_000
# Deepest JSON nesting of an imported program (saved programs nest about a dozen levels);
# checked on the text, before json recurses into it.
IMPORT_MAX_NESTING = 100
# Limits on the model settings an uploaded or stored program may carry: (lowest, highest).
# A missing/None timeout would let one request hold a worker forever; the others bound
# how hard one run may hammer a provider and how long its retries may sleep.
MODEL_LIMITS = {
    "timeout": (1.0, 600.0),
    "retries": (0, 10),
    "max_concurrency": (1, 32),
    "backoff": (0.0, 10.0),
}


class ProgramError(ValueError):
    """A program that cannot be built or imported; the message says why."""


def _class_name(text: str, suffix: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text) or ["Data"]
    name = "".join(word[:1].upper() + word[1:] for word in words)
    if name[0].isdigit():
        name = "D" + name
    return (name + suffix)[:60]


def build_engine_program(
    *,
    name: str,
    input_fields: list[dict],
    target_fields: list[dict],
    module: str,
    instructions: str,
    model: str,
    temperature: float = 0.0,
    api_base: str = "",
    description: str = "",
    max_tokens: int | None = None,
    endpoint: str = "",
    structured_output: str = "auto",
) -> Any:
    """The engine Program for a dataset schema + module + instructions + LM (at ``api_base``;
    ``endpoint``: the name of the saved endpoint that URL is, kept in the model's config)."""
    if module not in MODULES:
        raise ProgramError(f"module must be one of {', '.join(MODULES)}, not {module!r}")
    if not input_fields or not target_fields:
        raise ProgramError("the dataset needs at least one input field and one target field")
    if temperature < 0 or temperature > 2:
        raise ProgramError(f"temperature must be between 0 and 2, got {temperature}")
    try:
        language_model = make_language_model(
            model,
            temperature=temperature,
            api_base=api_base,
            max_tokens=max_tokens,
            endpoint=endpoint,
            structured_output=structured_output,
        )
        input_model = create_data_model(_class_name(name, "Input"), input_fields)
        output_model = create_data_model(_class_name(name, "Output"), target_fields)
    except (ModelStringError, ValueError, TypeError, synalinks.LanguageModelError) as exc:
        # LanguageModelError: the engine refused the model at construction (an unknown
        # local/… name, a local runtime that is missing): a form error, not a server error.
        raise ProgramError(str(exc)) from None
    generator = MODULES[module](
        data_model=output_model,
        language_model=language_model,
        instructions=instructions or None,
        name=module.lower() if module == "Generator" else "chain_of_thought",
    )
    return synalinks.Sequential(
        [synalinks.Input(data_model=input_model), generator],
        name=re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "program",
        description=description or None,
    )


def _clamp(value: Any, low: float, high: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return high  # None (no limit) or not a number: the server's ceiling
    clamped = min(max(value, low), high)
    return int(clamped) if isinstance(low, int) else float(clamped)


def _sanitize_model_config(config: dict, is_language_model: bool) -> None:
    if is_language_model:
        config["cache"] = False  # never a path or Redis URL chosen by the document
    config.pop("api_key", None)  # a key comes only from a saved endpoint, at the call
    if config.get("api_base"):  # loopback/private only for a saved endpoint, if allowed
        config["allow_private_addresses"] = may_reach_private(config)
    for name, (low, high) in MODEL_LIMITS.items():
        if name in config or (name == "timeout" and is_language_model):
            config[name] = _clamp(config.get(name), low, high)


def sanitize_engine_json(document: Any) -> Any:
    """A copy of an engine program document that is safe to build in the dashboard.

    The document comes from an upload or from the database (an import stored before this
    check existed), so it is untrusted: a language model's ``cache`` could name any
    directory (``"disk:/any/path"``, created by the web process or the worker) or any
    Redis host. Every language/embedding model config found anywhere in the document
    (program modules, compile section, judges) gets ``cache`` False, no ``api_key`` (a key
    comes only from a saved endpoint, added where the model is called:
    ``saved_endpoints.connect``), private addresses only for a saved endpoint, and its timeout,
    retries, concurrency and backoff clamped to ``MODEL_LIMITS``, and must pass
    ``lm.check_model_config`` (the engine's own class, a known provider, an allowed
    ``api_base``): ProgramError otherwise. Every path that builds an engine program from
    stored or uploaded JSON goes through here (``program_from_json`` and the worker's load).
    """
    document = copy.deepcopy(document)
    for kind, node in model_nodes(document):
        try:
            check_model_config(str(node.get("class_name", "")), node["config"], kind)
        except ModelStringError as exc:
            raise ProgramError(str(exc)) from None
        _sanitize_model_config(node["config"], kind == "language_model")
    return document


def callable_document(document: Any, owner) -> Any:
    """A sanitised copy of ``document`` whose models on saved endpoints have those endpoints'
    current URLs and keys (``saved_endpoints.connect``): for where the models are called (the
    worker), kept in memory only. ProgramError when it cannot be."""
    from training.programs import saved_endpoints

    document = sanitize_engine_json(document)
    try:
        return saved_endpoints.connect(document, owner)
    except saved_endpoints.EndpointError as exc:
        raise ProgramError(str(exc)) from None


def program_from_json(document: Any, owner=None) -> Any:
    """Load an engine program from its JSON document; ProgramError with the reason if not.

    The document is sanitised first (see ``sanitize_engine_json``); with ``owner``, its saved
    endpoints are connected too (``callable_document``: for a program that will be called)."""
    if owner is not None:
        document = callable_document(document, owner)
    else:
        document = sanitize_engine_json(document)  # its ProgramError says which model is refused
    try:
        return synalinks.Program.from_config(document, compile=False)
    except synalinks.saving.UnknownObjectError as exc:
        if not exc.name:
            raise ProgramError(f"not a program saved by program.save(): {exc}") from None
        # A browser user cannot register code: say what the file needs, in their terms.
        raise ProgramError(
            f"the file uses {exc.name!r}, a class or function defined in the code that saved "
            "it, which this server does not have: it can import programs built from the "
            "modules, rewards and metrics it offers only. Save the program without that part, "
            f"or ask the administrator to install the code that defines {exc.name!r}"
        ) from None
    except Exception as exc:  # the engine raises several types; all mean "not loadable"
        raise ProgramError(f"not a program saved by program.save(): {exc}") from None


def parse_import(raw: bytes) -> tuple[dict, dict]:
    """Validate an uploaded program JSON; returns (document, summary fields for the row)."""
    if len(raw) > IMPORT_MAX_BYTES:
        raise ProgramError(f"the file is larger than {IMPORT_MAX_BYTES // (1024 * 1024)} MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProgramError(f"the file is not UTF-8 text (byte {exc.start})") from None
    line = nesting_depth_exceeds(text, IMPORT_MAX_NESTING)
    if line is not None:
        raise ProgramError(
            f"the JSON is nested more than {IMPORT_MAX_NESTING} levels deep (line {line})"
        )
    try:
        document = json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise ProgramError(
            f"the file is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except UnsafeJSON as exc:
        raise ProgramError(f"the file is not valid JSON: {exc}") from None
    bad = lone_surrogate(document, text)
    if bad is not None:
        raise ProgramError(f"the JSON holds {describe_surrogate(bad)}")
    program = program_from_json(document)
    config = program.get_config()
    for key, bound in (("name", NAME_MAX_CHARS), ("description", DESCRIPTION_MAX_CHARS)):
        value = config.get(key)
        if isinstance(value, str) and len(value) > bound:
            raise ProgramError(
                f"the program's {key} is {len(value):,} characters long; at most {bound:,}"
            )
    where = non_finite_path(config)
    if where is not None:  # e.g. "nan" given for a number: no JSON column stores NaN
        raise ProgramError(f"{where} is not a finite number")
    return config, summarize(program)


def missing_keys(program: Any) -> str | None:
    """What a launch must refuse: a model of ``program`` whose provider key the server's
    environment lacks (``lm.missing_keys``), named with the variable; None when all are set."""
    for module in program.modules:
        model = getattr(module, "language_model", None)
        if model is None:
            continue
        names = lm_missing_keys(model.model, getattr(model, "api_base", None))
        if names:
            return (
                f"model {model.model!r} needs {' or '.join(names)} in the server's environment, "
                "which is not set: ask the administrator to set it, or put the program on a "
                "saved endpoint"
            )
    return None


def first_generator(program: Any) -> Any | None:
    for module in program.modules:
        if isinstance(module, synalinks.Generator):
            return module
    return None


def program_language_model(program: Any) -> Any | None:
    """The model of a program's first generator (the program's model: what the run's
    helpers that name no model of their own inherit, address and key included)."""
    generator = first_generator(program)
    return generator.language_model if generator is not None else None


def connected_language_model(document: Any, owner) -> Any | None:
    """:func:`program_language_model` of a stored document, on its saved endpoint with its
    key (:func:`callable_document`): for a helper called outside a run's attempt (a judge
    re-score). ProgramError when the document cannot be loaded here."""
    document = callable_document(document, owner)
    try:
        program = synalinks.Program.from_config(document, compile=False)
    except (ValueError, TypeError, KeyError) as exc:
        raise ProgramError(f"the run's program cannot be loaded: {exc}") from None
    return program_language_model(program)


def answers_labels(program: Any) -> bool:
    """Whether an engine program answers a label set: a generator whose output is one label
    field (decided from label scores; the launch form recommends an optimizer for it)."""
    return any(
        callable(getattr(module, "label_field", None)) and module.label_field() is not None
        for module in program.modules
    )


def summarize(program: Any) -> dict[str, Any]:
    """Module type, instructions, model, temperature of a program's first generator."""
    generator = first_generator(program)
    summary: dict[str, Any] = {
        "module": "Generator",
        "instructions": "",
        "model": "",
        "temperature": 0.0,
        "api_base": "",
        "endpoint": "",
        "max_tokens": None,
    }
    if generator is None:
        return summary
    summary["module"] = (
        "ChainOfThought" if isinstance(generator, synalinks.ChainOfThought) else "Generator"
    )
    summary["instructions"] = (generator.state.value if generator.state else {}).get(
        "instructions", ""
    )
    lm = generator.language_model
    summary["model"] = getattr(lm, "model", "")
    summary["api_base"] = getattr(lm, "api_base", None) or ""
    summary["endpoint"] = getattr(lm, "endpoint", None) or ""
    summary["max_tokens"] = getattr(lm, "max_tokens", None)
    temperature = (
        generator.temperature
        if generator.temperature is not None
        else getattr(lm, "temperature", 0.0)
    )
    summary["temperature"] = float(temperature or 0.0)
    return summary


def input_field_names(program: Any) -> list[str]:
    names: list[str] = []
    for symbol in program.inputs:
        names.extend(symbol.data_model.model_fields)
    return names


def output_field_names(program: Any) -> list[str]:
    names: list[str] = []
    for symbol in program.outputs:
        names.extend(symbol.data_model.model_fields)
    return names


def check_compatible(program: Any, input_fields: list[str], target_fields: list[str]) -> list[str]:
    """Problems that stop ``program`` from training on a dataset with these fields."""
    problems = []
    if len(program.inputs) != 1 or len(program.outputs) != 1:
        problems.append("the dashboard trains programs with exactly one input and one output")
        return problems
    missing_inputs = [name for name in input_field_names(program) if name not in input_fields]
    if missing_inputs:
        problems.append(
            f"the program's input needs field(s) {missing_inputs} that the dataset's inputs "
            f"({input_fields}) do not have"
        )
    outputs = output_field_names(program)
    missing_targets = [name for name in target_fields if name not in outputs]
    if missing_targets:
        problems.append(
            f"the dataset's target field(s) {missing_targets} are not in the program's output ({outputs})"
        )
    return problems


# --- saving Program rows -----------------------------------------------------------------------


def create_program(owner, data: dict[str, Any], engine_program: Any) -> Program:
    """Save a program built with the dashboard's form.

    Args:
        owner: the user it belongs to.
        data: the form's cleaned data (name, description, dataset, module, instructions,
            model, api_base, temperature, max_tokens).
        engine_program: the engine program the form built from ``data``; its ``get_config()``
            is what the row stores, the worker loads and "Export" downloads.

    Returns:
        The saved Program (source ``form``).
    """
    return Program.objects.create(
        owner=owner,
        name=data["name"],
        description=data.get("description", ""),
        dataset=data["dataset"],
        module=data["module"],
        instructions=data.get("instructions", ""),
        model=data["model"],
        api_base=data.get("api_base", ""),
        temperature=data["temperature"],
        max_tokens=data.get("max_tokens"),
        source=Program.SOURCE_FORM,
        engine_json=engine_program.get_config(),
    )


def import_program(
    owner, document: dict, summary: dict[str, Any], *, name: str = "", dataset=None
) -> Program:
    """Save an uploaded program document that ``parse_import`` already checked.

    Args:
        owner: the user it belongs to.
        document: the sanitised engine JSON (stored as is).
        summary: ``parse_import``'s summary fields (module, instructions, model, ...).
        name: the name typed on the form; else the document's, else "imported program".
        dataset: the dataset chosen on the form, if any.

    Returns:
        The saved Program (source ``import``).
    """
    return Program.objects.create(
        owner=owner,
        name=name or document.get("name") or "imported program",
        description=document.get("description") or "",
        dataset=dataset,
        module=summary["module"],
        instructions=summary["instructions"],
        model=summary["model"],
        api_base=summary["api_base"],
        temperature=summary["temperature"],
        max_tokens=summary["max_tokens"],
        source=Program.SOURCE_IMPORT,
        engine_json=document,
    )
