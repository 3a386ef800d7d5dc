"""The competition of OMEGA's population at each epoch end: DNS on the candidates' embedding
distances (or GA elitism), each candidate's kept/dropped event with what a population map
needs, and the embedding cache behind it.

:class:`Competition` is a mixin of :class:`~training.engine.optimizers.omega.OMEGA`. Each
distinct value is embedded once for the whole fit (:func:`embedding_text` says what of it);
a custom ``distance_function`` is called on the pairs DNS reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import numpy as np

from training.engine.optimizers import dns
from training.engine.optimizers.mutation import canonical
from training.engine.utils.projection import compact_embedding
from training.engine.variables import Variable


def embedding_text(value: dict[str, Any]) -> str:
    """What DNS embeds of a candidate: its canonical JSON, a NearestFewShot pool summarised
    (its base64 vectors say nothing a text embedding can read, and would fill its window)."""
    retrieval = value.get("retrieval")
    if isinstance(retrieval, dict) and retrieval.get("pool"):
        pool = retrieval["pool"]
        value = {**value, "retrieval": {"k": retrieval.get("k"), "pool_size": len(pool)}}
    return canonical(value)


def _embedding_key(value: Any) -> str:
    """The embedding cache's key for a candidate value (its canonical JSON's digest)."""
    return hashlib.sha1(canonical(value).encode()).hexdigest()


class Competition:
    """Mixin of OMEGA: it reads the optimizer's population, settings and embedding model,
    and emits through its ``emit_candidate``."""

    def _prune_embeddings(self) -> None:
        """Forget the vectors of dropped candidates (the cache stays population-sized)."""
        alive = {
            _embedding_key(c["value"])
            for variable in self.trainable_variables
            for c in self.population(variable)
        }
        self._embeddings = {k: v for k, v in self._embeddings.items() if k in alive}

    async def compete(self, variable: Variable) -> list[dict[str, Any]]:
        """Run DNS (or GA elitism) on ``variable``'s population; emit kept/dropped; return kept."""
        population = self.population(variable)
        if not population:
            return []
        rewards = [c["reward"] for c in population]
        started = time.perf_counter()
        texts_before = self.texts_embedded
        scores: np.ndarray | None = None
        if self.algorithm == "dns" and len(population) > 1:
            try:
                distances = await self.distance_matrix([c["value"] for c in population], rewards)
                kept, scores = dns.dns_select(
                    rewards, distances, self.k_nearest_fitter, self.population_size
                )
            except Exception as exc:  # no distances: keep the fittest rather than stop fit
                await self._failed(variable, "competition", exc)
                kept = dns.elitism(rewards, self.population_size)
        else:
            kept = dns.elitism(rewards, self.population_size)
        self.competition_stats.append(
            {
                "epoch": self.epoch,
                "variable": variable.name,
                "population": len(population),
                "kept": len(kept),
                "embedding_texts": self.texts_embedded - texts_before,
                "seconds": time.perf_counter() - started,
            }
        )
        kept_set = set(kept)
        for index, candidate in enumerate(population):
            candidate["novelty"] = None if scores is None else round(float(scores[index]), 6)
            candidate["status"] = "kept" if index in kept_set else "dropped"
            await self.emit_candidate(variable, candidate, **self._map_fields(candidate))
        return [population[i] for i in kept]

    def _map_fields(self, candidate: dict[str, Any]) -> dict[str, Any]:
        """What a population map needs beyond the candidate: the epoch of this competition
        and the candidate's embedding when DNS computed one (bounded: ``compact_embedding``).
        Never stored on the candidate itself (it is saved with the program)."""
        fields: dict[str, Any] = {"competition_epoch": self.epoch}
        vector = self._embeddings.get(_embedding_key(candidate["value"]))
        if vector is not None:
            fields["embedding"] = compact_embedding(vector)
        return fields

    async def embed(self, values: list[dict[str, Any]]) -> np.ndarray:
        """One vector per value; each distinct value is embedded once for the whole fit."""
        keys = [_embedding_key(v) for v in values]
        missing: dict[str, str] = {}
        for key, value in zip(keys, values, strict=True):
            if key not in self._embeddings and key not in missing:
                missing[key] = embedding_text(value)
        if missing:
            vectors = await self.embedding_model(list(missing.values()))
            if len(vectors) != len(missing):
                raise RuntimeError(
                    f"embedding model returned {len(vectors)} vectors for {len(missing)} texts"
                )
            self.texts_embedded += len(missing)
            for key, vector in zip(missing, vectors, strict=True):
                self._embeddings[key] = np.asarray(vector, dtype=float)
        return np.stack([self._embeddings[key] for key in keys])

    async def distance_matrix(
        self, values: list[dict[str, Any]], rewards: list[float]
    ) -> np.ndarray:
        """N×N distances: cosine over embeddings (one numpy op), or the custom function on the
        pairs DNS reads (those with different rewards; the function is taken as symmetric)."""
        if self.distance_function is None:
            return dns.cosine_distance_matrix(await self.embed(values))
        count = len(values)
        pairs = [
            (i, j) for i in range(count) for j in range(i + 1, count) if rewards[i] != rewards[j]
        ]
        results = await asyncio.gather(
            *(
                self.distance_function(values[i], values[j], embedding_model=self.embedding_model)
                for i, j in pairs
            )
        )
        distances = np.full((count, count), np.nan)
        np.fill_diagonal(distances, 0.0)
        for (i, j), value in zip(pairs, results, strict=True):
            distances[i, j] = distances[j, i] = float(value)
        return distances
