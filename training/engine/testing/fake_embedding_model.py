"""FakeEmbeddingModel: deterministic hashed bag-of-words vectors (cosine ~ word overlap)."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from typing import Any

from training.engine.language_models.embedding_model import EmbeddingModel
from training.engine.saving import register_synalinks_serializable

_WORD = re.compile(r"\w+")


def hashed_vector(text: str, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    for word in _WORD.findall(str(text).lower()):
        digest = hashlib.md5(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dimensions] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


@register_synalinks_serializable(package="synalinks")
class FakeEmbeddingModel(EmbeddingModel):
    """Same text → same vector; texts sharing words → high cosine similarity.

    Args:
        model: the model string it reports (in usage and traces).
        dimensions: the length of every vector.
        latency: seconds each request waits, to play a slow provider.
        **kwargs: the :class:`~training.engine.EmbeddingModel` options (``batch_size``,
            ``retries``...); ``backoff`` defaults to 0.
    """

    def __init__(
        self,
        model: str = "fake/embedding",
        dimensions: int = 64,
        latency: float = 0.0,
        **kwargs: Any,
    ):
        kwargs.setdefault("backoff", 0.0)
        super().__init__(model=model, **kwargs)
        self.dimensions = int(dimensions)
        self.latency = float(latency)
        self.calls = 0
        self.texts_embedded = 0

    async def _raw_embed(self, texts: list[str]) -> tuple[list[list[float]], int, float | None]:
        self.calls += 1
        self.texts_embedded += len(texts)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return (
            [hashed_vector(t, self.dimensions) for t in texts],
            sum(len(t.split()) for t in texts),
            0.0,
        )

    def _cost_bound(self, texts: list[str]) -> float | None:
        """A scripted embedding costs nothing, as its answer says: no price to look up (which
        would import litellm, seconds of CPU, in every process that embeds with it)."""
        return 0.0

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"dimensions": self.dimensions, "latency": self.latency})
        return config
