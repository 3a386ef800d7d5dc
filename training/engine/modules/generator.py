"""Generator: one structured LM call, input JSON → output DataModel.

Its trainable variable ``state`` holds ``{"instructions": str, "examples": [{"inputs",
"outputs"}]}`` and, once ``NearestFewShot`` or ``CalibratedLabels`` trained it, a
``retrieval`` pool (``example_retrieval.py``) and a label ``decision``
(``label_decision.py``). The prompt is: a system message (fixed preamble, the instructions),
the few-shot examples as user/assistant turns, then the ``k`` pool examples nearest to the input
(the nearest last, next to the input; unless the pool is for the vote only), then the input
JSON. The LanguageModel appends the output fields (names, types, descriptions) to the system
message on every call, and sends the schema as ``response_format`` or in the prompt (see
LanguageModel and output_format.py).

An output that is one label field (a ``Literal``) is decided rather than sampled when the
model can score labels (``LanguageModel.score_labels``): every label is scored, then the
state's ``decision`` weighs those scores, a bias per label and the nearest pool examples'
labels (``label_decision.py``). A model that cannot score samples the field as before.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import numpy as np

from training.engine.data_model import DataModel, data_model_from_schema, label_choices
from training.engine.language_models.embedding_model import EmbeddingModel
from training.engine.language_models.language_model import LanguageModel
from training.engine.modules import example_retrieval as retrieval
from training.engine.modules import label_decision, label_readout, prompt_rendering
from training.engine.modules.module import TRACE, Module, field_list
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.trainers import output_bounds

#: Re-exported: the preamble is the prompt rule's (``prompt_rendering.py``).
PREAMBLE = prompt_rendering.PREAMBLE

STATE_DESCRIPTION = (
    "The prompt state of generator {name!r}: `instructions` tell the language model how to "
    "turn an input into the output ({output}); `examples` are few-shot demonstrations, each a "
    "correct `outputs` object for its `inputs` object."
)


def _plain(schema: dict) -> dict:
    """A schema usable inline (no $refs) or a generic object schema."""
    text = json.dumps(schema)
    return schema if "$ref" not in text and "$defs" not in text else {"type": "object"}


def _merge_inputs(inputs: Any) -> dict[str, Any] | None:
    if isinstance(inputs, list | tuple):
        merged: dict[str, Any] = {}
        for item in inputs:
            if item is None:
                return None
            merged.update(item.get_json())
        return merged
    if inputs is None:
        return None
    return inputs.get_json() if hasattr(inputs, "get_json") else dict(inputs)


@register_synalinks_serializable(package="synalinks")
class Generator(Module):
    """One LM call that turns its inputs into a ``data_model`` (structured output).

    Its trainable variable holds the instructions and few-shot examples the optimizers change
    (and, with ``NearestFewShot``, a ``retrieval`` pool of embedded training examples); the
    prompt is built from that variable on every call, so training never changes the code.

    ``embedding_model`` embeds each input to retrieve the nearest pool examples, when the state
    has a ``retrieval`` pool (``NearestFewShot`` sets it to its own when the Generator has
    none). Without one, a pool made by a ``local/`` model uses that model.

    Args:
        data_model: The ``DataModel`` class of the output (its fields and descriptions become
            the output format, a ``Literal`` field a label set the grammar enforces).
        schema: A JSON schema instead of ``data_model`` (used when loading a saved program).
        language_model: The ``LanguageModel`` that answers. Required.
        instructions: The initial task instructions (empty by default; optimizers rewrite them).
        examples: Initial few-shot examples, each ``(inputs, outputs)`` or
            ``{"inputs": ..., "outputs": ...}``.
        temperature: Sampling temperature for this module's calls (the model's own when None).
        name: Unique module name (a snake-case name with a counter when None).
        description: What the module is for (shown in summaries and to OMEGA's mutations).
        trainable: Whether optimizers may change its variable.
        embedding_model: The ``EmbeddingModel`` used to retrieve pool examples (see above).
        score_labels: Decide an output that is one label field from every label's score when
            the model can score them (True), or always sample it (False).

    Example:

    ```python
    outputs = await synalinks.Generator(
        data_model=Answer,
        language_model=language_model,
    )(inputs)
    ```
    """

    def __init__(
        self,
        data_model: type[DataModel] | None = None,
        schema: dict | None = None,
        language_model: LanguageModel | None = None,
        instructions: str | None = None,
        examples: list | None = None,
        temperature: float | None = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
        embedding_model: Any = None,
        score_labels: bool = True,
    ):
        super().__init__(name=name, description=description, trainable=trainable)
        if data_model is None:
            if schema is None:
                raise ValueError(
                    f"{type(self).__name__} {self.name!r} needs data_model=... or schema=..."
                )
            data_model = data_model_from_schema(schema)
        if not (isinstance(data_model, type) and issubclass(data_model, DataModel)):
            raise TypeError(
                f"{type(self).__name__} {self.name!r}: data_model must be a DataModel class"
            )
        if language_model is None:
            raise ValueError(f"{type(self).__name__} {self.name!r} needs language_model=...")
        self.data_model = data_model
        self.language_model = language_model
        self.embedding_model = embedding_model
        self.score_labels = bool(score_labels)
        self.temperature = temperature
        self.initial_instructions = instructions or ""
        self.initial_examples = [self._normalize_example(e) for e in (examples or [])]
        self.output_data_model = self.compute_output_data_model([])
        self._prefix_cache: tuple[str, list[dict]] | None = None
        #: {state hash: the pool's (N, D) matrix}: decoded once per pool, not per call.
        self._pool_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        #: {(embedding model, text): vector}: one embedding call per distinct input.
        self._query_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self.state = None

    # -- structure -------------------------------------------------------------------------
    def compute_output_data_model(self, input_data_models: list) -> type[DataModel]:
        return self.data_model

    @staticmethod
    def _normalize_example(example: Any) -> dict[str, Any]:
        if isinstance(example, dict) and "inputs" in example and "outputs" in example:
            pair = (example["inputs"], example["outputs"])
        elif isinstance(example, list | tuple) and len(example) == 2:
            pair = example
        else:
            raise ValueError(
                f"example {example!r}: expected (inputs, outputs) or {{'inputs','outputs'}}"
            )
        return {"inputs": _merge_inputs(pair[0]), "outputs": _merge_inputs(pair[1])}

    def state_schema(self) -> dict[str, Any]:
        inputs_schema = {"type": "object"}
        if self.input_data_models and len(self.input_data_models) == 1:
            inputs_schema = _plain(self.input_data_models[0].get_schema())
        outputs_schema = _plain(self.output_data_model.get_schema())
        return {
            "type": "object",
            "properties": {
                "instructions": {"type": "string", "description": "Task instructions for the LM"},
                "examples": {
                    "type": "array",
                    "description": "Few-shot demonstrations (correct outputs only)",
                    "items": {
                        "type": "object",
                        "properties": {
                            "inputs": inputs_schema,
                            "outputs": outputs_schema,
                        },
                        "required": ["inputs", "outputs"],
                    },
                },
                # optional: only a NearestFewShot- or CalibratedLabels-trained state has one
                "retrieval": retrieval.retrieval_schema(inputs_schema, outputs_schema),
                "decision": label_decision.decision_schema((self.label_field() or (None, None))[1]),
            },
            "required": ["instructions", "examples"],
        }

    def build(self, input_data_models: list) -> None:
        super().build(input_data_models)
        self.state = self.add_variable(
            "state",
            {"instructions": self.initial_instructions, "examples": self.initial_examples},
            self.state_schema(),
            STATE_DESCRIPTION.format(
                name=self.name,
                output=f"{self.output_data_model.__name__}: {field_list(self.output_data_model)}",
            ),
        )

    # -- prompt ----------------------------------------------------------------------------
    def prompt_prefix(self) -> list[dict[str, str]]:
        """System message + example turns (``prompt_rendering``), rebuilt only when the state
        variable changes."""
        key = self.state.hash
        if self._prefix_cache is not None and self._prefix_cache[0] == key:
            return self._prefix_cache[1]
        value = self.state.value
        messages = prompt_rendering.prefix_messages(
            self.description, value.get("instructions") or "", value.get("examples", [])
        )
        self._prefix_cache = (key, messages)
        return messages

    def format_messages(
        self,
        input_json: dict[str, Any],
        retrieved: list[dict[str, Any]] | None = None,
        hint: str = "",
    ) -> list[dict[str, str]]:
        """The prompt for ``input_json``: the prefix, the ``retrieved`` examples (nearest
        first; shown nearest last), then the input. ``hint`` ends the system message."""
        return prompt_rendering.filled_messages(self.prompt_prefix(), input_json, retrieved, hint)

    # -- retrieval -------------------------------------------------------------------------
    def retrieval_embedding_model(self, settings: dict[str, Any]) -> Any:
        """The model that embeds inputs for ``settings`` (the state's ``retrieval``)."""
        if self.embedding_model is not None:
            return self.embedding_model
        name = settings.get("embedding_model") or ""
        if name.startswith("local/"):  # offline and free: safe to make from a saved name
            self.embedding_model = EmbeddingModel(model=name)
            return self.embedding_model
        raise retrieval.RetrievalError(
            f"{type(self).__name__} {self.name!r} retrieves examples made by embedding model "
            f"{name!r}: give it embedding_model=... (the same model)"
        )

    def _pool(self, pool: list[dict[str, Any]]) -> np.ndarray:
        key = self.state.hash
        matrix = self._pool_cache.get(key)
        if matrix is None:
            matrix = retrieval.pool_matrix(pool)
            self._pool_cache[key] = matrix
            while len(self._pool_cache) > retrieval.POOL_CACHE_SIZE:
                self._pool_cache.popitem(last=False)
        return matrix

    async def query_vector(self, embedding_model: Any, text: str) -> np.ndarray:
        """The input's embedding: one embedding call per distinct text (then remembered)."""
        key = (getattr(embedding_model, "model", repr(embedding_model)), text)
        vector = self._query_cache.get(key)
        if vector is None:
            vectors = await embedding_model([text])
            if len(vectors) != 1:
                raise retrieval.RetrievalError(
                    f"embedding model returned {len(vectors)} vectors for 1 text"
                )
            vector = retrieval.as_stored(vectors[0])
            self._query_cache[key] = vector
            while len(self._query_cache) > retrieval.QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        else:
            self._query_cache.move_to_end(key)
        return vector

    async def retrieve(
        self, input_json: dict[str, Any], leave_out_own_row: bool = False
    ) -> tuple[list[dict[str, Any]], str]:
        """(the ``k`` pool examples nearest to ``input_json``, nearest first; the vote hint
        or ""). Nothing without a pool. ``leave_out_own_row``: never the same inputs."""
        settings = self.state.value.get("retrieval") or {}
        pool = settings.get("pool") or []
        if not pool:
            return [], ""
        matrix = self._pool(pool)
        query = await self.query_vector(
            self.retrieval_embedding_model(settings), retrieval.retrieval_text(input_json)
        )
        exclude: list[int] = []
        if leave_out_own_row:
            own = retrieval.same_inputs_key(input_json)
            exclude = [
                i for i, e in enumerate(pool) if retrieval.same_inputs_key(e["inputs"]) == own
            ]
        picks = retrieval.nearest_indices(matrix, query, int(settings.get("k", 1)), exclude)
        examples = [{"inputs": pool[i]["inputs"], "outputs": pool[i]["outputs"]} for i in picks]
        hint = retrieval.vote_hint([e["outputs"] for e in examples]) if settings.get("vote") else ""
        return examples, hint

    # -- run -------------------------------------------------------------------------------
    def label_field(self) -> tuple[str, list[str]] | None:
        """(name, labels) when the output is one label field (a ``Literal`` of strings): what
        is decided from label scores rather than sampled; else None."""
        fields = self.output_data_model.model_fields
        labels = label_choices(next(iter(fields.values())).annotation) if len(fields) == 1 else None
        return (next(iter(fields)), labels) if labels else None

    async def call(self, inputs: Any, training: bool = False) -> DataModel | None:
        input_json = _merge_inputs(inputs)
        if input_json is None:
            return None
        if not self.built:
            items = inputs if isinstance(inputs, list | tuple) else [inputs]
            self._ensure_built([type(item) for item in items])
        state = self.state.value
        retrieved, hint = [], ""
        if state.get("retrieval"):
            # while fitting, a training row never retrieves itself (example_retrieval.py)
            retrieved, hint = await self.retrieve(
                input_json, leave_out_own_row=training or retrieval.leave_out_active()
            )
        shown = retrieved if (state.get("retrieval") or {}).get("in_prompt", True) else []
        messages = self.format_messages(input_json, shown, hint if shown else "")
        context_state = state
        if shown:  # what the prompt shows, in its order (a scripted fake LM reads it)
            context_state = {
                "instructions": state.get("instructions", ""),
                "examples": [*state.get("examples", []), *reversed(shown)],
            }
        context = {"module": self.name, "inputs": input_json, "state": context_state}
        label = self.label_field() if self.score_labels else None
        if label is not None and self.language_model.can_score_labels():
            decided = await self._decide(messages, label, state, retrieved, context, input_json)
            if decided is not None:
                return decided
        output = await self.language_model(
            messages,
            # within fit, at most OUTPUT_LENGTH_FACTOR × the longest target (output_bounds.py)
            output_bounds.bounded(self, self.output_data_model),
            temperature=self.temperature,
            context=context,
        )
        trace = TRACE.get()
        if trace is not None:
            trace.append({"module": self.name, "inputs": input_json, "outputs": output.get_json()})
        return output

    async def _decide(
        self,
        messages: list[dict[str, str]],
        label: tuple[str, list[str]],
        state: dict[str, Any],
        retrieved: list[dict[str, Any]],
        context: dict[str, Any],
        input_json: dict[str, Any],
    ) -> DataModel | None:
        """The label field decided from every label's score (None: the model gave none)."""
        field, labels = label
        scoring = await self.language_model.score_labels(
            messages, self.output_data_model, field, labels, context=context
        )
        if scoring is None:
            return None
        trace = TRACE.get()
        if scoring.scores is None:  # the provider sampled instead: its answer stands
            if trace is not None:
                trace.append(
                    {
                        "module": self.name,
                        "inputs": input_json,
                        "outputs": scoring.output.get_json(),
                    }
                )
            return scoring.output
        scores = scoring.scores
        index = label_decision.decide_for_input(
            scores,
            labels,
            state.get("decision"),
            field,
            retrieved,
            await self._readout(state.get("decision"), labels, input_json),
        )
        output = self.output_data_model(**{field: labels[index]})
        if trace is not None:
            trace.append(
                {
                    "module": self.name,
                    "inputs": input_json,
                    "outputs": output.get_json(),
                    # the LM's own scores, before the decision: what CalibratedLabels learns from
                    "label_scores": {"field": field, "labels": labels, "scores": list(scores)},
                }
            )
        return output

    async def _readout(
        self, decision: Any, labels: list[str], input_json: dict[str, Any]
    ) -> np.ndarray | None:
        """Each label's embedding read-out score for the input, when the decision has a
        read-out (the input embedded by the model it names, cached like a retrieval query)."""
        stored = decision.get("readout") if isinstance(decision, dict) else None
        if not stored:
            return None
        weights, intercepts = label_readout.from_json(stored, labels)
        named = stored.get("embedding_model") or ""
        model = self.retrieval_embedding_model({"embedding_model": named})
        if named and getattr(model, "model", named) != named:
            raise retrieval.RetrievalError(
                f"{type(self).__name__} {self.name!r}: the decision's read-out was fitted on "
                f"{named!r} embeddings, not {model.model!r}'s: give it embedding_model=... "
                "(the same model)"
            )
        vector = await self.query_vector(model, retrieval.retrieval_text(input_json))
        if len(vector) != weights.shape[0]:
            raise retrieval.RetrievalError(
                f"{type(self).__name__} {self.name!r}: the decision's read-out takes "
                f"{weights.shape[0]}-dimensional embeddings; {stored.get('embedding_model')!r} "
                f"gave {len(vector)}"
            )
        return label_readout.readout_scores(weights, intercepts, vector)

    @property
    def deterministic(self) -> bool:
        temperature = (
            self.language_model.temperature if self.temperature is None else self.temperature
        )
        return temperature == 0.0

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "data_model": self.data_model.get_schema(),
                "language_model": serialize(self.language_model),
                "instructions": self.initial_instructions,
                "examples": self.initial_examples,
                "temperature": self.temperature,
            }
        )
        if self.embedding_model is not None:  # only when used: older documents unchanged
            config["embedding_model"] = serialize(self.embedding_model)
        if not self.score_labels:  # the default is left out: older documents unchanged
            config["score_labels"] = False
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None) -> Generator:
        config = dict(config)
        schema = config.pop("data_model")
        language_model = deserialize(config.pop("language_model"), custom_objects)
        if config.get("embedding_model") is not None:
            config["embedding_model"] = deserialize(config["embedding_model"], custom_objects)
        return cls(schema=schema, language_model=language_model, **config)
