"""EmbeddingModel: batched text embeddings over ``litellm.aembedding``."""

from __future__ import annotations

import asyncio
from typing import Any

from training.engine.language_models import budget as budget_mod
from training.engine.language_models import tracing
from training.engine.language_models import usage as usage_mod
from training.engine.language_models.endpoints.address_guard import AddressPolicy
from training.engine.language_models.endpoints.endpoint_client import EndpointClients
from training.engine.language_models.errors import cancelled, short_message
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.litellm_loader import check_local_model, get_litellm
from training.engine.language_models.retry import call_with_retries
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class EmbeddingModel:
    """Text embeddings through litellm, batched ``batch_size`` texts a request.

    Shares the language model's retry rules (:mod:`training.engine.language_models.errors`) and per-model
    concurrency limit (:mod:`training.engine.language_models.retry`); usage is recorded as ``embedding_calls``.

    Args:
        model: ``"provider/name"`` as litellm knows it, or ``"local/minilm"`` (offline).
        api_base: the endpoint, when not the provider's default; called with ``api_key`` or no
            key, never the environment's, over checked connections (as :class:`LanguageModel`).
        api_key: the endpoint's own key; never saved in the config.
        endpoint: the saved endpoint's name, kept in the config.
        allow_private_addresses: whether ``api_base`` may be a loopback or private address.
        batch_size: texts per request.
        max_concurrency: requests in flight at once for this model.
        retries: further attempts after a transient error.
        backoff: seconds before the first retry; doubles after each.

    Returns:
        Calling it, ``await em(["text", ...])`` returns one vector (list of floats) per text;
        ``await em("text")`` returns a list holding one vector.

    Example:

    ```python
    embedding_model = synalinks.EmbeddingModel(model="ollama/mxbai-embed-large")
    vectors = await embedding_model(["first text", "second text"])
    ```
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        batch_size: int = 64,
        max_concurrency: int = 4,
        retries: int = 3,
        backoff: float = 0.5,
        api_key: str | None = None,
        endpoint: str | None = None,
        allow_private_addresses: bool = True,
    ):
        if not isinstance(model, str) or not model:
            raise ValueError("EmbeddingModel(model=...) needs a model string")
        self.model = model
        self.api_base = api_base
        self.batch_size = int(batch_size)
        self.max_concurrency = int(max_concurrency)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.endpoint = endpoint or None
        self.allow_private_addresses = bool(allow_private_addresses)
        self._endpoint = (
            EndpointClients(
                model, api_base, api_key, AddressPolicy(self.allow_private_addresses), 120.0
            )
            if api_base
            else None
        )
        if model.startswith("local/"):
            check_local_model(f"EmbeddingModel({model!r})", model)

    def get_config(self) -> dict[str, Any]:
        """The saved configuration: never ``api_key``."""
        config = {
            "model": self.model,
            "api_base": self.api_base,
            "batch_size": self.batch_size,
            "max_concurrency": self.max_concurrency,
            "retries": self.retries,
            "backoff": self.backoff,
        }
        if self.endpoint:
            config["endpoint"] = self.endpoint
        if not self.allow_private_addresses:
            config["allow_private_addresses"] = False
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> EmbeddingModel:
        return cls(**config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    def _describe(self) -> str:
        return f"embedding model {self.model!r}" + (
            f" at api_base {self.api_base!r}" if self.api_base else ""
        )

    async def __call__(self, texts: list[str] | str) -> list[list[float]]:
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not items:
            return []
        batches = [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        results = await asyncio.gather(*(self._embed_batch(batch) for batch in batches))
        vectors = [vector for batch in results for vector in batch]
        return vectors

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await self(texts)

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        meta = {"latency": 0.0, "attempts": 0, "prompt_tokens": 0, "cost": None}

        def attempted(latency: float, **record: Any) -> None:
            """Each attempt counts in the call's trace and in usage."""
            meta.update(latency=meta["latency"] + latency, attempts=meta["attempts"] + 1)
            usage_mod.record(
                usage_mod.UsageRecord(model=self.model, kind="embedding", latency=latency, **record)
            )

        def succeeded(result: tuple, latency: float) -> None:
            _, tokens, cost = result
            meta.update(prompt_tokens=tokens, cost=cost)
            attempted(latency, prompt_tokens=tokens, cost=cost)

        def failed(exc: BaseException, latency: float) -> None:
            if cancelled(exc):  # a call made, then given up by its caller: no failure
                attempted(latency)
                return
            attempted(latency, failed=True, error=short_message(exc))

        try:
            vectors, _, _ = await call_with_retries(
                lambda: self._raw_embed(texts),
                where=self._describe(),
                semaphore_key=("embedding", self.model, self.api_base),
                max_concurrency=self.max_concurrency,
                retries=self.retries,
                backoff=self.backoff,
                on_success=succeeded,
                on_failure=failed,
                # no call of the calls cap (as in usage), but its tokens and cost count
                bound=lambda: (0, budget_mod.text_token_bound(texts), self._cost_bound(texts)),
                spent=lambda result: (result[1], result[2]),
                limit_key=None
                if self.model.startswith("local/")
                else rate_limits.ProviderKey(self.model, self.api_base or None),
            )
        except Exception as exc:
            self._trace(texts, meta, error=str(exc), failed=True)
            raise
        dimensions = len(vectors[0]) if vectors else 0
        self._trace(texts, meta, response=f"{len(vectors)} vectors of {dimensions} dimensions")
        return vectors

    def _trace(self, texts: list[str], meta: dict, **values: Any) -> None:
        if tracing.active():
            shown = [
                {"role": "input", "content": text} for text in texts[: tracing.MAX_EMBEDDING_TEXTS]
            ]
            if len(texts) > len(shown):
                shown.append({"role": "note", "content": f"{len(texts) - len(shown)} more texts"})
            tracing.emit(kind="embedding", model=self.model, messages=shown, **meta, **values)

    def _cost_bound(self, texts: list[str]) -> float | None:
        """The most embedding ``texts`` can cost (0 for a local model, None when the price
        is unknown), for a budget's reservation."""
        if self.model.startswith("local/"):
            return 0.0
        try:
            price = get_litellm().get_model_info(self.model).get("input_cost_per_token")
        except Exception:
            return None
        return None if price is None else budget_mod.text_token_bound(texts) * float(price)

    async def _raw_embed(self, texts: list[str]) -> tuple[list[list[float]], int, float | None]:
        litellm = get_litellm()
        kwargs: dict[str, Any] = {"model": self.model, "input": texts}
        if self._endpoint is not None:  # its own key or none, a guarded client
            kwargs.update(self._endpoint.request_options("embedding"))
        response = await litellm.aembedding(**kwargs)
        data = response.data if hasattr(response, "data") else response["data"]
        vectors = [item["embedding"] if isinstance(item, dict) else item.embedding for item in data]
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "prompt_tokens", 0) or 0
        try:
            cost = litellm.completion_cost(completion_response=response, call_type="aembedding")
        except Exception:
            cost = None
        return vectors, tokens, cost
