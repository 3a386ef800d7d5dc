"""A trained program as plain prompts: per module, the messages it sends and what decides them.

Why: a trained program is JSON variables a Generator turns into prompts on every call; to use
it elsewhere (another runtime, a provider's playground, a review of what was learnt) one wants
the prompts themselves. :func:`export_plain_prompts` writes, per module, the messages every
call starts with as the Generator renders them (``modules/prompt_rendering.py``: the same
function, so the export cannot drift from what is sent), how the input is added, the note the
model appends to the system message, the schemas, and what is not a plain prompt: a label
field decided from label scores (the decision's weights and biases), a retrieval pool (its
examples and vectors: each input must be embedded to find its neighbours) and an embedding
read-out. ``saving/plain_prompt_scoring.py`` re-scores a split from this document alone.

The document (JSON, ``format`` :data:`FORMAT`, ``version`` :data:`VERSION`)::

    {"format": "trainboard-plain-prompts", "version": 1, "program": "sentiment",
     "inputs": [{"name": "input:0", "schema": {...}}], "outputs": ["node:0"],
     "single_output": true,
     "graph": [{"module": "generator", "inputs": ["input:0"], "output": "node:0"}],
     "modules": [{
        "name": "generator", "class_name": "synalinks>Generator",
        "language_model": {"class_name": "synalinks>LanguageModel", "config": {...}},
        "temperature": null, "input_schemas": [...], "output_schema": {...},
        "instructions": "...", "examples": [{"inputs": {...}, "outputs": {...}}],
        "messages": [{"role": "system", "content": "..."}, {"role": "user", ...}, ...],
        "input_message": {"role": "user", "content": "<the input's fields as JSON>"},
        "output_note": "Output: one JSON object ...", "response_format": {...} or null,
        "label_decision": null or {"field", "labels", "decision", "decided_from_scores"},
        "retrieval": null or {"k", "embedding_model", "vote", "in_prompt", "pool"},
        "embedding_model": null or {...},
        "not_plain": ["what a plain prompt cannot reproduce, in words"]}],
     "rendering": "how a call's messages are filled, in words"}

A model's saved settings never hold its key (``LanguageModel.get_config``).
"""

from __future__ import annotations

import copy
from typing import Any

from training.engine.modules import prompt_rendering
from training.engine.modules.generator import Generator
from training.engine.saving.serialization import serialize

FORMAT = "trainboard-plain-prompts"
VERSION = 1

RENDERING = (
    "Each call sends `messages`, then the input as one user message: the JSON of the module's "
    "inputs (its input objects' fields merged in order; json.dumps, ensure_ascii=False). The "
    "model appends `output_note` to the system message after a blank line, and sends "
    "`response_format` as the structured-output schema when it is not null. With a retrieval "
    "pool, the input is embedded, its k nearest pool examples (cosine) are inserted as "
    "user/assistant turns before the input (the nearest last) and, with `vote`, one sentence "
    "naming their commonest answer ends the system message. A label field whose "
    "`label_decision.decided_from_scores` is true is not sampled when the model can score "
    "labels: each label's log-probability is read and the `decision` (LM weight, bias per "
    "label, the neighbours' vote, an embedding read-out) picks the label."
)


class PlainPromptError(ValueError):
    """A program that cannot be written as plain prompts (a module that is not a Generator)."""


def _ref_names(program: Any) -> tuple[dict[int, str], list[dict[str, Any]]]:
    names: dict[int, str] = {}
    inputs = []
    for index, symbol in enumerate(program.inputs):
        names[id(symbol)] = f"input:{index}"
        inputs.append({"name": f"input:{index}", "schema": symbol.data_model.get_schema()})
    for index, node in enumerate(program.nodes):
        names[id(node.output)] = f"node:{index}"
    return names, inputs


def _sent(module: Generator, prefix: list[dict[str, str]]) -> tuple[str, dict | None]:
    """(the note the model appends to the system message, the response format it sends or
    None): asked of the model itself, as every call asks it."""
    sent, response_format = module.language_model.prompt_for(prefix, module.output_data_model)
    system = prefix[0]["content"]
    appended = sent[0]["content"]
    note = appended[len(system) + 2 :] if appended.startswith(system + "\n\n") else appended
    return note, response_format


def _label_decision(module: Generator, state: dict[str, Any]) -> dict[str, Any] | None:
    label = module.label_field()
    if label is None:
        return None
    field, labels = label
    return {
        "field": field,
        "labels": list(labels),
        "decided_from_scores": module.score_labels,
        "decision": copy.deepcopy(state.get("decision")),
    }


def _not_plain(entry: dict[str, Any]) -> list[str]:
    """What sending ``messages`` alone would not reproduce, said in words."""
    notes = []
    decision = entry["label_decision"]
    if decision and decision["decided_from_scores"]:
        notes.append(
            f"label field {decision['field']!r}: decided from every label's log-probability "
            "when the model can score labels (the local model and providers with logprobs), "
            "not sampled; the decision's weights are in label_decision"
        )
        readout = (decision.get("decision") or {}).get("readout")
        if readout:
            notes.append(
                "embedding read-out: each input is embedded by "
                f"{readout.get('embedding_model')!r} to weigh the labels; re-scoring needs "
                "that embedding model"
            )
    retrieval = entry["retrieval"]
    if retrieval and retrieval.get("pool"):
        where = "put in the prompt" if retrieval.get("in_prompt", True) else "a vote only"
        notes.append(
            f"retrieval: each input is embedded by {retrieval.get('embedding_model')!r} to find "
            f"its {retrieval.get('k')} nearest of {len(retrieval['pool'])} pool examples "
            f"({where}); re-scoring needs that embedding model"
        )
    return notes


def _module_entry(module: Any) -> dict[str, Any]:
    if not isinstance(module, Generator):
        raise PlainPromptError(
            f"module {module.name!r} is a {type(module).__name__}: only Generator and "
            "ChainOfThought modules are written as prompts"
        )
    state = module.state.value
    prefix = [dict(message) for message in module.prompt_prefix()]
    note, response_format = _sent(module, prefix)
    retrieval = state.get("retrieval")
    entry = {
        "name": module.name,
        "class_name": serialize(module)["class_name"],
        "description": module.description,
        "language_model": serialize(module.language_model),
        "temperature": module.temperature,
        "input_schemas": [model.get_schema() for model in module.input_data_models or []],
        "output_schema": module.output_data_model.get_schema(),
        "instructions": state.get("instructions") or "",
        "examples": copy.deepcopy(state.get("examples") or []),
        "messages": prefix,
        "input_message": {"role": "user", "content": "<the input's fields as JSON>"},
        "output_note": note,
        "response_format": response_format,
        "label_decision": _label_decision(module, state),
        "retrieval": copy.deepcopy(retrieval) if retrieval else None,
        "embedding_model": serialize(module.embedding_model),
    }
    entry["not_plain"] = _not_plain(entry)
    return entry


def export_plain_prompts(program: Any) -> dict[str, Any]:
    """``program`` (its current variables) as plain prompts: see the module docstring.

    Raises:
        PlainPromptError: a module that is not a Generator (it sends no prompt of its own).
    """
    names, inputs = _ref_names(program)
    graph = [
        {
            "module": node.module.name,
            "inputs": [names[id(symbol)] for symbol in node.inputs],
            "output": names[id(node.output)],
        }
        for node in program.nodes
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "program": program.name,
        "description": program.description,
        "inputs": inputs,
        "outputs": [names[id(symbol)] for symbol in program.outputs],
        "single_output": program.single_output,
        "graph": graph,
        "modules": [_module_entry(module) for module in program.modules],
        "rendering": RENDERING,
        "preamble": prompt_rendering.PREAMBLE,
    }


__all__ = ["FORMAT", "VERSION", "PlainPromptError", "export_plain_prompts"]
