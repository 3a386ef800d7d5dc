"""``CosineSimilarity``: semantic closeness of prediction and ground truth via embeddings.

Each compared field is embedded (ground truth and prediction), the cosine of the
two vectors is rescaled from [-1, 1] to [0, 1] as in Synalinks
(``(cos + 1) / 2``) and the fields are averaged. Identical texts score 1.0
without being embedded, and a whole batch is embedded in one call.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from training.engine.masking import MaskedDataModel
from training.engine.rewards.reward import Reward, check_score
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.scoring import is_batch


def field_text(value: Any) -> str:
    """The text embedded for one field value (JSON for structured values)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def compared_fields(y_true: MaskedDataModel, y_pred: MaskedDataModel) -> list[str]:
    """The ground truth's fields (the reference decides what is expected)."""
    return list(y_true) if y_true else list(y_pred)


@register_synalinks_serializable(package="synalinks")
class CosineSimilarity(Reward):
    """Mean over compared fields of ``(cosine(embed(true), embed(pred)) + 1) / 2``.

    Args:
        embedding_model: the :class:`~training.engine.EmbeddingModel` that embeds both
            sides (required); a batch's texts go in one call.
        in_mask: the only fields compared (None: every field of the ground truth).
        out_mask: fields left out of the comparison (``["thinking"]``: not the reasoning).
        name: the name in logs and history (None: the class name in snake_case).

    Example:

    ```python
    synalinks.rewards.CosineSimilarity(embedding_model=em, in_mask=["answer"])
    ```
    """

    def __init__(self, embedding_model=None, in_mask=None, out_mask=None, name=None):
        if embedding_model is None:
            raise ValueError("CosineSimilarity needs an embedding_model (an EmbeddingModel)")
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)
        self.embedding_model = embedding_model

    async def call(self, y_true: MaskedDataModel | None, y_pred: MaskedDataModel) -> float:
        return (await self._score_prepared([(y_true, y_pred)]))[0]

    async def score_batch(self, y_true: Any, y_pred: Any) -> list[float]:
        """Embed every text of the batch in a single embedding-model call."""
        trues, preds = self._pairs(y_true, y_pred)
        prepared: list[tuple[MaskedDataModel | None, MaskedDataModel]] = []
        positions: list[int] = []
        scores = [0.0] * len(preds)
        for index, (truth, pred) in enumerate(zip(trues, preds, strict=True)):
            if pred is None:
                continue
            prepared.append(self._prepare(truth, pred))
            positions.append(index)
        for index, score in zip(positions, await self._score_prepared(prepared), strict=True):
            scores[index] = check_score(score, self.where)
        return scores

    async def _score_prepared(
        self, pairs: list[tuple[MaskedDataModel | None, MaskedDataModel]]
    ) -> list[float]:
        texts: list[str] = []
        index_of: dict[str, int] = {}
        # per pair: list of (true text index | None, pred text index | None) per field
        plans: list[list[tuple[int, int] | float]] = []

        def slot(text: str) -> int:
            if text not in index_of:
                index_of[text] = len(texts)
                texts.append(text)
            return index_of[text]

        for y_true, y_pred in pairs:
            if y_true is None:
                raise ValueError(f"{self.where} needs a ground truth, but y_true is None")
            plan: list[tuple[int, int] | float] = []
            for field in compared_fields(y_true, y_pred):
                true_text = field_text(y_true.get(field))
                pred_text = field_text(y_pred.get(field))
                if true_text == pred_text:
                    plan.append(1.0)
                elif not true_text.strip() or not pred_text.strip():
                    plan.append(0.0)
                else:
                    plan.append((slot(true_text), slot(pred_text)))
            plans.append(plan)

        vectors = await self._embed(texts) if texts else np.zeros((0, 0))
        scores = []
        for plan in plans:
            field_scores = []
            for item in plan:
                if isinstance(item, float):
                    field_scores.append(item)
                else:
                    a, b = vectors[item[0]], vectors[item[1]]
                    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
                    cosine = float(np.dot(a, b) / norm) if norm > 0 else 0.0
                    field_scores.append((cosine + 1.0) / 2.0)
            scores.append(float(np.mean(field_scores)) if field_scores else 1.0)
        return scores

    async def _embed(self, texts: list[str]) -> np.ndarray:
        """Call the embedding model once for all ``texts``; returns one row per text."""
        model = self.embedding_model
        embed = getattr(model, "embed", None)
        result = await (embed(texts) if callable(embed) else model(texts))
        if isinstance(result, dict):
            result = result.get("embeddings")
        elif hasattr(result, "embeddings"):
            result = result.embeddings
        if result is None or is_batch(result) is False:
            raise TypeError(
                f"{self.where}: the embedding model returned {type(result).__name__}; "
                "expected one vector per text"
            )
        vectors = np.asarray(result, dtype=float)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(
                f"{self.where}: expected {len(texts)} embedding vectors, got shape {vectors.shape}"
            )
        return vectors

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["embedding_model"] = serialize(self.embedding_model)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        config = dict(config)
        config["embedding_model"] = deserialize(config.get("embedding_model"), custom_objects)
        return cls(**config)
