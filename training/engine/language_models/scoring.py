"""``LanguageModel.score_labels``: a label field's labels scored in one call of the model.

The mixin :class:`LabelScoring` is part of :class:`~training.engine.language_models.
language_model.LanguageModel`: the scoring request goes through the model's own machinery
(output note, concurrency, provider limits, budget, retries, usage, tracing, cache); how each
kind of model is scored is :mod:`~training.engine.language_models.label_scoring`'s.
"""

from __future__ import annotations

from typing import Any

import pydantic

from training.engine.language_models import tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.completion import RawCompletion, new_meta
from training.engine.language_models.errors import (
    LanguageModelConfigError,
    LanguageModelError,
    LanguageModelUnreachable,
    is_context_window,
    is_non_transient,
)
from training.engine.language_models.label_scoring import (
    TOP_LOGPROBS,
    answer,
    continuation,
    opening,
    provider_supports_logprobs,
    registered_scorer,
    scores_from_logprobs,
)
from training.engine.language_models.label_scoring import (
    LabelScoring as Scoring,
)
from training.engine.language_models.parsing import OutputParseError, parse_output


class LabelScoring:
    """The label-scoring methods of a LanguageModel (see the module docstring)."""

    _can_score: bool | None = None

    def can_score_labels(self) -> bool:
        """Whether :meth:`score_labels` can score (else it returns None and callers sample):
        a provider that registered a scorer, or one that returns log-probabilities."""
        if self._can_score is None:
            self._can_score = registered_scorer(
                self.model
            ) is not None or provider_supports_logprobs(self.model)
        return self._can_score

    async def score_labels(
        self,
        messages: list[dict[str, str]],
        data_model: type[pydantic.BaseModel],
        field: str,
        labels: list[str],
        context: dict[str, Any] | None = None,
    ) -> Scoring | None:
        """The log-probability of each of ``labels`` as the value of ``field`` (the one field
        of ``data_model``), for the prompt ``messages``; None when this model gives no
        scores (see :mod:`~training.engine.language_models.label_scoring`). A provider that
        answered without log-probabilities gives its answer instead (``output``): the model
        samples from then on, and that answer is not asked for twice.

        One call like :meth:`__call__`'s: the same output note in the prompt, the same
        concurrency, provider limits, budget, retries and timeout, counted in usage and
        traced (the trace's response is the best-scored answer, with every label's score).
        Deterministic, so cached like a call at temperature 0.
        """
        if not self.can_score_labels():
            return None
        messages, response_schema = self.prompt_for(messages, data_model)
        meta = new_meta() if tracing.active() else None
        key = None
        if self.cache is not None:
            key = self._key(messages, {"score_labels": field, "labels": labels}, 0.0)
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("scores"), list):
                usage_mod.record(usage_mod.UsageRecord(model=self.model, cache_hit=True))
                if meta is not None:
                    meta["cache_hit"] = True
                    self._trace_scores(messages, meta, field, labels, hit["scores"], data_model)
                return Scoring(scores=hit["scores"])
        try:
            raw = await self._complete_with_retries(
                lambda: self._raw_scores(messages, response_schema, field, labels),
                meta,
                messages,
            )
        except LanguageModelError as exc:
            if meta is not None:
                self._trace(messages, meta, error=str(exc), failed=True)
            if refused_scoring(exc):
                # A provider (or gateway) that refuses ``logprobs``: sample from now on; a
                # request refused for another reason is refused again there, and said.
                self._can_score = False
                return None
            raise
        if raw.scores is None:
            if not raw.logprobs_returned:
                self._can_score = False  # the provider answers without log-probabilities
            # With them, this one answer did not show where the value starts (fenced, cut
            # short): it stands as sampled, and the next call is scored again.
            try:
                output = parse_output(raw.text, data_model)
            except OutputParseError as exc:
                if meta is not None:
                    self._trace(messages, meta, response=raw.text, error=str(exc), failed=True)
                return None
            if meta is not None:
                self._trace(messages, meta, response=raw.text, parsed=output)
            return Scoring(output=output)
        if key is not None:
            self.cache.set(key, {"scores": raw.scores})
        if meta is not None:
            self._trace_scores(messages, meta, field, labels, raw.scores, data_model)
        return Scoring(scores=raw.scores)

    def _trace_scores(
        self, messages: list, meta: dict, field: str, labels: list, scores: list, data_model
    ) -> None:
        best = labels[max(range(len(labels)), key=lambda i: scores[i])]
        shown = ", ".join(f"{lab} {v:.3f}" for lab, v in zip(labels, scores, strict=True))
        self._trace(
            messages,
            meta,
            # what the model said: every label's log-probability (the best one as the answer)
            response=f"{answer(field, best)}\nlabel log-probabilities: {shown}",
            parsed=data_model(**{field: best}),
        )

    async def _raw_scores(
        self, messages: list, schema: dict | None, field: str, labels: list[str]
    ) -> RawCompletion:
        """One scoring request: the registered scorer's, else a provider request with
        log-probabilities (overridden by the testing fakes)."""
        scorer = registered_scorer(self.model)
        if scorer is not None:
            scored = await scorer(
                self.model,
                messages,
                opening(field),
                [continuation(label) for label in labels],
                self.timeout,
            )
            return RawCompletion(
                text=answer(field, labels[max(range(len(labels)), key=lambda i: scored.scores[i])]),
                prompt_tokens=scored.prompt_tokens,
                completion_tokens=scored.completion_tokens,
                cost=0.0,
                scores=scored.scores,
            )
        raw, logprobs = await self._request(
            messages, schema, 0.0, {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
        )
        raw.logprobs_returned = bool(logprobs)
        raw.scores = scores_from_logprobs(raw.text, logprobs or [], field, labels)
        return raw


def refused_scoring(exc: LanguageModelError) -> bool:
    """Whether a scoring request failed because the provider would not take it as asked (a
    bad request, e.g. ``logprobs`` refused), not because the model or endpoint is unusable."""
    if isinstance(exc, LanguageModelConfigError | LanguageModelUnreachable):
        return False
    cause = exc.__cause__
    return cause is not None and is_non_transient(cause) and not is_context_window(cause)
