"""Re-score a split from a plain-prompt export alone: no Program, no program document.

Why: an export (``plain_prompts.py``) is only worth using elsewhere if it answers as the
program did. :func:`rescore_plain_prompts` checks that: it fills each module's exported
messages for every input row (``prompt_rendering``, the Generator's own rule), calls the
exported model through the engine's :class:`LanguageModel` (its retries, budget, parsing),
decides an exported label field from label scores with the exported decision when the export
says so and the model can score labels, walks the exported graph, and scores the outputs with
the given reward. Its mean beside the program's own test score is the parity check.

What it cannot do from plain prompts it says (``PlainPromptScore.not_reproduced``): a
retrieval pool or an embedding read-out needs the embedding model that made the vectors; a
module without one is scored without its neighbours and read-out, and the comparison names
that as the reason of a difference. A model whose output note differs from the exported one
(another litellm, another structured-output setting) is named in ``drift``.

The document is untrusted (a download edited by hand, an upload): :func:`check_export`
bounds it before anything is built; its models go through the engine's registry (never
imported, never evaluated) and its caller sanitises them as any program's (the dashboard's
``callable_document``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.engine.data_model import data_model_from_schema
from training.engine.language_models.embedding_model import EmbeddingModel
from training.engine.language_models.errors import (
    LanguageModelConfigError,
    LanguageModelUnreachable,
)
from training.engine.language_models.language_model import LanguageModel
from training.engine.modules import example_retrieval as retrieval
from training.engine.modules import label_decision, label_readout, prompt_rendering
from training.engine.saving.plain_prompts import FORMAT, VERSION
from training.engine.saving.serialization import deserialize

#: Modules an export may hold (a program of prompts, not a catalogue).
MAX_MODULES = 32
#: Graph nodes an export may hold.
MAX_NODES = 64
#: Messages one module's prefix may hold (a system message and few-shot turns).
MAX_MESSAGES = 2_001
#: Characters of all prefix messages together.
MAX_MESSAGE_CHARS = 2_000_000
#: Rows one re-score takes.
MAX_ROWS = 100_000
ROLES = ("system", "user", "assistant")


class ExportError(ValueError):
    """An export that cannot be re-scored, with what is wrong."""


@dataclass
class PlainPromptScore:
    """What re-scoring from the export gave: each row's reward, prediction and error, and
    what the export could not reproduce (``not_reproduced``) or saw differ (``drift``)."""

    rewards: list[float]
    predictions: list[Any]
    errors: list[str | None]
    not_reproduced: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)

    @property
    def reward(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0

    @property
    def failures(self) -> int:
        return sum(error is not None for error in self.errors)


def _fail(message: str) -> None:
    raise ExportError(f"not a plain-prompt export: {message}")


def _check_module(entry: Any) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        _fail("each module is an object with a name")
    name = entry["name"]
    messages = entry.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        _fail(f"module {name!r}: messages is a list of 1 to {MAX_MESSAGES} messages")
    for message in messages:
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            _fail(f"module {name!r}: a message is a {{role, content}} with a known role")
    if messages[0]["role"] != "system":
        _fail(f"module {name!r}: the first message is the system message")
    if not isinstance(entry.get("output_schema"), dict):
        _fail(f"module {name!r}: output_schema is a JSON schema")
    if not isinstance(entry.get("language_model"), dict):
        _fail(f"module {name!r}: language_model is a saved model")
    temperature = entry.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or not 0 <= temperature <= 2
    ):
        _fail(f"module {name!r}: temperature is a number from 0 to 2 or null")
    decision = entry.get("label_decision")
    if decision is not None:
        labels = decision.get("labels") if isinstance(decision, dict) else None
        if (
            not isinstance(labels, list)
            or not 1 <= len(labels) <= label_decision.MAX_LABELS
            or not all(isinstance(label, str) for label in labels)
            or not isinstance(decision.get("field"), str)
        ):
            _fail(f"module {name!r}: label_decision names its field and labels")
        if decision.get("decision"):
            try:
                label_decision.check_decision(decision["decision"], labels)
            except ValueError as exc:
                _fail(f"module {name!r}: {exc}")
    pool_settings = entry.get("retrieval")
    if pool_settings is not None:
        if not isinstance(pool_settings, dict) or not isinstance(pool_settings.get("pool"), list):
            _fail(f"module {name!r}: retrieval holds a pool")
        k = pool_settings.get("k", 1)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= retrieval.MAX_K:
            _fail(f"module {name!r}: retrieval's k is from 1 to {retrieval.MAX_K}")
        if len(pool_settings["pool"]) > retrieval.MAX_POOL_SIZE:
            _fail(f"module {name!r}: a pool holds at most {retrieval.MAX_POOL_SIZE} examples")


def check_export(export: Any) -> dict[str, Any]:
    """``export`` checked (ExportError saying what is wrong): its format and version, its
    graph's references, and every bound above."""
    if not isinstance(export, dict) or export.get("format") != FORMAT:
        _fail(f"expected a JSON object with format {FORMAT!r}")
    if not isinstance(export.get("version"), int) or export["version"] > VERSION:
        _fail(f"version {export.get('version')!r} is not one this engine reads (≤ {VERSION})")
    modules, graph, inputs = export.get("modules"), export.get("graph"), export.get("inputs")
    if not isinstance(modules, list) or not 1 <= len(modules) <= MAX_MODULES:
        _fail(f"modules is a list of 1 to {MAX_MODULES}")
    if not isinstance(graph, list) or not 1 <= len(graph) <= MAX_NODES:
        _fail(f"graph is a list of 1 to {MAX_NODES} nodes")
    if not isinstance(inputs, list) or not 1 <= len(inputs) <= MAX_NODES:
        _fail("inputs is a list of the program's inputs")
    for entry in modules:
        _check_module(entry)
    chars = sum(len(m["content"]) for entry in modules for m in entry["messages"])
    if chars > MAX_MESSAGE_CHARS:
        _fail(f"the messages hold {chars} characters; at most {MAX_MESSAGE_CHARS}")
    names = {entry["name"] for entry in modules}
    known = {item.get("name") for item in inputs if isinstance(item, dict)}
    for node in graph:
        if not isinstance(node, dict) or node.get("module") not in names:
            _fail("each graph node names one of the modules")
        refs = node.get("inputs")
        if not isinstance(refs, list) or not refs or any(ref not in known for ref in refs):
            _fail(f"node of {node['module']!r} reads an input no earlier node gives")
        known.add(node.get("output"))
    outputs = export.get("outputs")
    if not isinstance(outputs, list) or not outputs or any(ref not in known for ref in outputs):
        _fail("outputs name the graph's nodes")
    return export


class _Module:
    """One exported module, ready to answer: its model, data model and decided parts."""

    def __init__(
        self,
        entry: dict[str, Any],
        language_model_for: Callable[[dict], Any],
        embedding_model: Any,
    ) -> None:
        self.entry = entry
        self.name = entry["name"]
        self.language_model = language_model_for(entry["language_model"])
        if not isinstance(self.language_model, LanguageModel):
            raise ExportError(f"module {self.name!r}: language_model is not a language model")
        self.output_model = data_model_from_schema(entry["output_schema"])
        self.embedding_model = embedding_model
        self.settings = entry.get("retrieval") or {}
        self.pool = self.settings.get("pool") or []
        self.matrix = retrieval.pool_matrix(self.pool) if self.pool else None
        decided = entry.get("label_decision") or {}
        self.label = (
            (decided["field"], list(decided["labels"]))
            if decided.get("decided_from_scores")
            else None
        )
        self.decision = decided.get("decision")
        self.query_cache: dict[str, np.ndarray] = {}

    def drift(self) -> list[str]:
        """The note and response format this model would send, where not the exported ones."""
        differs = []
        note, response_format = _sent_now(self.language_model, self.entry, self.output_model)
        if note != self.entry.get("output_note"):
            differs.append(
                f"module {self.name!r}: the model appends another output note than the "
                "export's (another structured-output setting or litellm version)"
            )
        if response_format != self.entry.get("response_format"):
            differs.append(f"module {self.name!r}: the model sends another response format")
        return differs

    def missing(self) -> list[str]:
        """What this module cannot reproduce without an embedding model."""
        if self.embedding_model is not None:
            return []
        notes = []
        if self.pool:
            notes.append(
                f"module {self.name!r}: its retrieval pool needs the embedding model "
                f"{self.settings.get('embedding_model')!r}, which is not available here: scored "
                "without the retrieved examples"
            )
        if self.label and (self.decision or {}).get("readout"):
            notes.append(
                f"module {self.name!r}: its decision's embedding read-out needs "
                f"{self.decision['readout'].get('embedding_model')!r}, not available here: "
                "decided without it"
            )
        return notes

    async def _query(self, input_json: dict[str, Any]) -> np.ndarray:
        text = retrieval.retrieval_text(input_json)
        vector = self.query_cache.get(text)
        if vector is None:
            vectors = await self.embedding_model([text])
            if len(vectors) != 1:
                raise retrieval.RetrievalError(
                    f"embedding model returned {len(vectors)} vectors for 1 text"
                )
            vector = retrieval.as_stored(vectors[0])
            self.query_cache[text] = vector
        return vector

    async def _retrieve(self, input_json: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        if self.matrix is None or self.embedding_model is None:
            return [], ""
        query = await self._query(input_json)
        picks = retrieval.nearest_indices(self.matrix, query, int(self.settings.get("k", 1)))
        examples = [
            {"inputs": self.pool[i]["inputs"], "outputs": self.pool[i]["outputs"]} for i in picks
        ]
        hint = (
            retrieval.vote_hint([e["outputs"] for e in examples])
            if self.settings.get("vote")
            else ""
        )
        return examples, hint

    async def _readout(self, input_json: dict[str, Any], labels: list[str]) -> Any:
        stored = (self.decision or {}).get("readout")
        if not stored or self.embedding_model is None:
            return None
        weights, intercepts = label_readout.from_json(stored, labels)
        vector = await self._query(input_json)
        if len(vector) != weights.shape[0]:
            raise retrieval.RetrievalError(
                f"module {self.name!r}: the read-out takes {weights.shape[0]}-dimensional "
                f"embeddings; the embedding model gave {len(vector)}"
            )
        return label_readout.readout_scores(weights, intercepts, vector)

    async def __call__(self, input_json: dict[str, Any]) -> Any:
        """The module's answer for ``input_json``, as the Generator gives it."""
        retrieved, hint = await self._retrieve(input_json)
        shown = retrieved if self.settings.get("in_prompt", True) else []
        messages = prompt_rendering.filled_messages(
            self.entry["messages"], input_json, shown, hint if shown else ""
        )
        # what a scripted fake reads (the Generator gives the same); never sent to a provider
        context = {
            "module": self.name,
            "inputs": input_json,
            "state": {
                "instructions": self.entry.get("instructions") or "",
                "examples": [*(self.entry.get("examples") or []), *reversed(shown)],
            },
        }
        model = self.language_model
        if self.label is not None and model.can_score_labels():
            field_name, labels = self.label
            scoring = await model.score_labels(
                messages, self.output_model, field_name, labels, context=context
            )
            if scoring is not None and scoring.scores is None:
                return scoring.output
            if scoring is not None:
                index = label_decision.decide_for_input(
                    scoring.scores,
                    labels,
                    self.decision,
                    field_name,
                    retrieved,
                    await self._readout(input_json, labels),
                )
                return self.output_model(**{field_name: labels[index]})
        return await model(
            messages,
            self.output_model,
            temperature=self.entry.get("temperature"),
            context=context,
        )


def _sent_now(model: Any, entry: dict[str, Any], output_model: type) -> tuple[str, Any]:
    prefix = entry["messages"]
    sent, response_format = model.prompt_for(prefix, output_model)
    system = prefix[0]["content"]
    appended = sent[0]["content"]
    note = appended[len(system) + 2 :] if appended.startswith(system + "\n\n") else appended
    return note, response_format


def _embedding_model(entry: dict[str, Any], given: Any) -> Any:
    """The model that embeds this module's inputs: the caller's, the exported module's, or
    an offline ``local/`` one named by the pool or read-out (as the Generator finds it);
    None when the module embeds nothing or no such model is available."""
    settings = entry.get("retrieval") or {}
    readout = ((entry.get("label_decision") or {}).get("decision") or {}).get("readout") or {}
    if not settings.get("pool") and not readout:
        return None
    if given is not None:
        return given
    if entry.get("embedding_model"):
        model = deserialize(entry["embedding_model"])
        if isinstance(model, EmbeddingModel):
            return model
    name = settings.get("embedding_model") or readout.get("embedding_model") or ""
    return EmbeddingModel(model=name) if str(name).startswith("local/") else None


def _merged(values: Sequence[Any]) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for value in values:
        if value is None:
            return None
        merged.update(value)
    return merged


async def rescore_plain_prompts(
    export: dict[str, Any],
    x: Sequence[Any],
    y: Sequence[Any],
    reward: Any,
    batch_size: int = 32,
    language_model_for: Callable[[dict], Any] | None = None,
    embedding_models: dict[str, Any] | None = None,
) -> PlainPromptScore:
    """Score ``x`` against ``y`` with ``reward`` from ``export`` alone.

    Args:
        export: an :func:`~training.engine.saving.plain_prompts.export_plain_prompts`
            document (checked by :func:`check_export`).
        x: the input rows: dicts of the program's input fields, or DataModels (a program
            with several inputs: one list per row).
        y: the targets, as ``Program.evaluate`` takes them.
        reward: the :class:`~training.engine.rewards.Reward` the program was scored with.
        batch_size: rows predicted at once (as ``evaluate``'s).
        language_model_for: builds a module's model from its saved settings (default: the
            engine's registry); the dashboard passes its settings connected to a saved
            endpoint, the export itself never holds a key.
        embedding_models: ``{module name: EmbeddingModel}`` for a pool or read-out made by a
            model the export cannot build itself.

    Returns:
        A :class:`PlainPromptScore`: each row's reward, prediction and error, and what could
        not be reproduced.
    """
    check_export(export)
    if len(x) != len(y) or len(x) > MAX_ROWS:
        raise ExportError(f"{len(x)} inputs and {len(y)} targets: equal, at most {MAX_ROWS}")
    build = language_model_for or deserialize
    modules = {
        entry["name"]: _Module(
            entry, build, _embedding_model(entry, (embedding_models or {}).get(entry["name"]))
        )
        for entry in export["modules"]
    }
    input_models = [data_model_from_schema(item["schema"]) for item in export["inputs"]]
    not_reproduced = [note for module in modules.values() for note in module.missing()]
    drift = [note for module in modules.values() for note in module.drift()]

    async def predict(row: Any) -> tuple[Any, str | None]:
        items = list(row) if len(input_models) > 1 else [row]
        values: dict[str, Any] = {}  # each symbol's JSON: what a module reads
        answers: dict[str, Any] = {}  # each node's answer: what the reward reads
        for item, model, spec in zip(items, input_models, export["inputs"], strict=True):
            values[spec["name"]] = model(**_fields(item)).get_json()
        try:
            for node in export["graph"]:
                merged = _merged([values[ref] for ref in node["inputs"]])
                answer = await modules[node["module"]](merged) if merged is not None else None
                answers[node["output"]] = answer
                values[node["output"]] = answer.get_json() if answer is not None else None
        except (LanguageModelUnreachable, LanguageModelConfigError):
            raise
        except Exception as exc:  # counted as a failed prediction, as evaluate counts it
            return None, str(exc)[:500]
        outputs = [answers.get(ref) for ref in export["outputs"]]
        return (outputs[0] if export.get("single_output", True) else outputs), None

    predictions: list[Any] = []
    errors: list[str | None] = []
    for start in range(0, len(x), max(1, int(batch_size))):
        done = await asyncio.gather(*(predict(row) for row in x[start : start + batch_size]))
        predictions.extend(prediction for prediction, _ in done)
        errors.extend(error for _, error in done)
    values = list(await reward.score_batch(list(y), predictions))
    rewards = [0.0 if math.isnan(float(v)) else float(v) for v in values]
    return PlainPromptScore(rewards, predictions, errors, not_reproduced, drift)


def _fields(item: Any) -> dict[str, Any]:
    if hasattr(item, "get_json"):
        return item.get_json()
    if isinstance(item, dict):
        return dict(item)
    raise ExportError(f"an input row is a dict of the program's input fields, not {item!r:.80}")


def comparison(score: PlainPromptScore, own: float | None, rows: int) -> dict[str, Any]:
    """The parity check in words: the export's score beside the program's own, equal or the
    difference with what explains it."""
    text = f"export scores {score.reward:.4f} on the {rows} test rows"
    if own is None:
        return {"equal": None, "text": text + "; the run has no test score of its own"}
    equal = math.isclose(score.reward, own, rel_tol=0.0, abs_tol=1e-9)
    text += f"; the run's own test score {own:.4f}: "
    if equal:
        text += "equal"
    else:
        reasons = [*score.not_reproduced, *score.drift]
        if score.failures:
            reasons.append(f"{score.failures} prediction(s) failed when re-scored")
        if not reasons:
            reasons.append(
                "nothing the export leaves out: the model answered differently (a "
                "temperature above 0, another model version, or a program changed since)"
            )
        text += f"differs by {score.reward - own:+.4f}: " + "; ".join(reasons)
    return {"equal": equal, "text": text}


__all__ = [
    "ExportError",
    "PlainPromptScore",
    "check_export",
    "comparison",
    "rescore_plain_prompts",
]
