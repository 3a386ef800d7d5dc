"""FakeLanguageModel: a scripted, deterministic LM for unit tests and benchmarks.

It goes through the real LanguageModel pipeline (prompt, semaphore, retries, parsing, usage,
cache); only the provider request is replaced. Answers come from, in order: ``responder``
(a function of a :class:`FakeRequest`, sync or async), ``responses`` (a dict keyed by the
input's first field value or by the input's canonical JSON), or a default that copies
same-named input fields and fills the rest with empty values. ``latency`` (seconds) and
``failure_rate`` (seeded) simulate slow and flaky providers.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
from dataclasses import dataclass, field
from typing import Any

from training.engine.language_models.errors import TransientError
from training.engine.language_models.language_model import LanguageModel, RawCompletion
from training.engine.saving import (
    UnknownObjectError,
    get_registered_name,
    get_registered_object,
    register_synalinks_serializable,
)

_EMPTY = {"string": "", "integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}


@dataclass
class FakeRequest:
    """What the fake sees of a call."""

    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    temperature: float
    inputs: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    module: str | None = None

    @property
    def instructions(self) -> str:
        return self.state.get("instructions", "")

    @property
    def examples(self) -> list[dict[str, Any]]:
        return self.state.get("examples", [])

    def default_output(self) -> dict[str, Any]:
        return default_output(self.schema, self.inputs)


def default_output(schema: dict | None, inputs: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return {}
    result = {}
    for name, spec in (schema.get("properties") or {}).items():
        if name in inputs:
            result[name] = inputs[name]
        else:
            kind = spec.get("type") if isinstance(spec, dict) else None
            if isinstance(spec, dict) and spec.get("enum"):
                # A label field: like a grammar-constrained model, answer a listed label.
                result[name] = spec["enum"][0]
            else:
                result[name] = _EMPTY.get(kind, "")
    return result


@register_synalinks_serializable(package="synalinks")
class FakeLanguageModel(LanguageModel):
    """A scripted LM that goes through the real :class:`LanguageModel` pipeline.

    Args:
        model: the model string it reports (in usage and traces).
        responses: answers keyed by the input's first field value or its canonical JSON.
        responder: ``responder(request: FakeRequest) -> dict`` (sync or async), asked first;
            a registered name is looked up.
        latency: seconds each request waits, to play a slow provider.
        failure_rate: the share of requests that fail (drawn from ``seed``).
        failure: how they fail: ``"error"`` (transient, retried), ``"garbage"`` (unparsable
            output), ``"unreachable"`` or ``"fatal"``.
        seed: seeds the failure draws.
        prompt_tokens: the prompt tokens each call reports.
        completion_tokens: the completion tokens each call reports.
        cost_per_call: the cost each call reports (None: unknown).
        backoff: seconds before the first retry (0: retries at once).
        structured_output: as :class:`LanguageModel`'s, but ``"response_format"`` by
            default (the fake honours the schema).
        holds_to_schema: play a grammar-constrained model (the output bound then applies;
            the responder must keep to the schema's ``maxLength`` itself).
        label_scorer: ``label_scorer(request, labels) -> [score per label]`` (sync or async;
            a registered name is looked up): the model then scores label fields
            (:meth:`LanguageModel.score_labels`) instead of only sampling them.
        **kwargs: the other :class:`LanguageModel` options.

    Example:

    ```python
    lm = FakeLanguageModel(responses={"What is 2+2?": {"answer": "4"}}, latency=0.1)
    ```
    """

    def __init__(
        self,
        model: str = "fake/scripted",
        responses: dict[str, Any] | None = None,
        responder: Any = None,
        latency: float = 0.0,
        failure_rate: float = 0.0,
        failure: str = "error",
        seed: int = 0,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        cost_per_call: float | None = 0.0,
        backoff: float = 0.0,
        structured_output: str = "response_format",
        holds_to_schema: bool = False,
        label_scorer: Any = None,
        **kwargs: Any,
    ):
        super().__init__(
            model=model, backoff=backoff, structured_output=structured_output, **kwargs
        )
        if failure not in ("error", "garbage", "unreachable", "fatal"):
            raise ValueError("failure must be 'error', 'garbage', 'unreachable' or 'fatal'")
        if isinstance(responder, str):
            responder = get_registered_object(responder)
        if isinstance(label_scorer, str):
            label_scorer = get_registered_object(label_scorer)
        self.label_scorer = label_scorer
        #: plays a grammar-constrained model for ``output_bounds`` (the responder must then
        #: keep to the schema's maxLength itself)
        self._holds_to_schema = bool(holds_to_schema)
        self.responses = dict(responses or {})
        self.responder = responder
        self.latency = float(latency)
        self.failure_rate = float(failure_rate)
        self.failure = failure
        self.seed = seed
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_per_call = cost_per_call
        self._rng = random.Random(seed)
        self.calls = 0
        self.requests: list[FakeRequest] = []
        self.record_requests = False

    def cost_bound(self, tokens: int) -> float | None:
        """A scripted call costs ``cost_per_call`` whatever its tokens."""
        return self.cost_per_call

    def can_score_labels(self) -> bool:
        return self.label_scorer is not None

    async def _request_of(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> tuple[FakeRequest, RawCompletion | None]:
        """The request a call makes, after its latency; with a garbage answer when the
        simulated failure is one (a raised error for the others)."""
        self.calls += 1
        context = context or {}
        request = FakeRequest(
            messages=messages,
            schema=schema,
            temperature=temperature,
            inputs=context.get("inputs") or _last_user_json(messages),
            state=context.get("state") or {},
            module=context.get("module"),
        )
        if self.record_requests:
            self.requests.append(request)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self.failure_rate > 0 and self._rng.random() < self.failure_rate:
            if self.failure == "error":
                raise TransientError(f"{self.model}: simulated transient failure (HTTP 503)")
            if self.failure == "unreachable":
                raise ConnectionError(f"{self.model}: simulated connection refused")
            if self.failure == "fatal":
                raise ValueError(f"{self.model}: simulated non-retryable failure (HTTP 400)")
            return request, RawCompletion(
                text="Sorry, I cannot answer that.", prompt_tokens=self.prompt_tokens
            )
        return request, None

    async def _raw_scores(
        self, messages: list, schema: dict | None, field: str, labels: list[str]
    ) -> RawCompletion:
        request, garbage = await self._request_of(messages, schema, 0.0, None)
        if garbage is not None:
            return garbage
        scores = self.label_scorer(request, labels)
        if inspect.isawaitable(scores):
            scores = await scores
        scores = [float(score) for score in scores]
        best = labels[max(range(len(labels)), key=lambda i: scores[i])]
        return RawCompletion(
            text=json.dumps({field: best}),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost=self.cost_per_call,
            scores=scores,
        )

    async def _raw_complete(
        self, messages: list, schema: dict | None, temperature: float, context: dict | None
    ) -> RawCompletion:
        request, garbage = await self._request_of(messages, schema, temperature, context)
        if garbage is not None:
            return garbage
        answer = await self._answer(request)
        if hasattr(answer, "get_json"):
            answer = answer.get_json()
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return RawCompletion(
            text=text,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost=self.cost_per_call,
        )

    async def _answer(self, request: FakeRequest) -> Any:
        if self.responder is not None:
            result = self.responder(request)
            if inspect.isawaitable(result):
                result = await result
            return result
        if self.responses:
            first = next(iter(request.inputs.values()), None) if request.inputs else None
            for key in (first, json.dumps(request.inputs, sort_keys=True)):
                if isinstance(key, str) and key in self.responses:
                    found = self.responses[key]
                    if isinstance(found, dict) and request.schema:
                        merged = default_output(request.schema, {})
                        merged.update(found)
                        return {
                            k: v
                            for k, v in merged.items()
                            if k in request.schema.get("properties", {})
                        }
                    return found
        return request.default_output()

    @property
    def holds_to_schema(self) -> bool:
        return self._holds_to_schema

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        for key in ("backoff", "structured_output"):
            config.pop(key, None)
        config.update(
            {
                "responses": self.responses,
                "latency": self.latency,
                "failure_rate": self.failure_rate,
                "failure": self.failure,
                "seed": self.seed,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost_per_call": self.cost_per_call,
            }
        )
        for key in ("responder", "label_scorer"):
            function = getattr(self, key)
            if function is None:
                continue
            try:
                config[key] = get_registered_name(function)
            except UnknownObjectError:
                config[key] = None  # an unregistered function cannot be saved
        return config


def _last_user_json(messages: list[dict]) -> dict:
    for message in reversed(messages):
        if message.get("role") == "user":
            try:
                value = json.loads(message["content"])
                return value if isinstance(value, dict) else {}
            except (ValueError, TypeError):
                return {}
    return {}
