"""Dominated Novelty Search (DNS): the competition OMEGA runs at each epoch end.

Pure functions over numpy arrays, so the rule can be tested on hand-made numbers. The rule is
the training guide's, word for word:

- for each candidate, find the candidates with a strictly higher reward (its *fitter* ones);
- none: its competition score is 1.0 and it is kept (it is not dominated);
- otherwise its score is the mean distance to its ``k_nearest_fitter`` nearest fitter ones
  (high: novel, unlike anything better; low: redundant, a worse copy of something better);
- keep the candidates whose score is above the median score (plus the undominated ones),
- then retain the top ``population_size`` of those by reward.

Distances come in as one N×N matrix. The default is the cosine distance between candidate
embeddings computed in a single matrix product, so a population of N costs N embeddings,
never N² embedding requests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from training.engine.bounds import MAX_COUNT, IntRange

#: Competition score of a candidate that nothing beats.
UNDOMINATED_SCORE = 1.0

#: Candidates each competition keeps per variable. At least 2: with one survivor there is
#: never a second parent for a crossover at an epoch's start, and the competition can keep
#: nothing novel beside the best (it degenerates into a hill-climb). OMEGA declares this bound
#: for its ``population_size`` and the functions below check it, so it is written once.
POPULATION_SIZE = IntRange(
    2, MAX_COUNT, help="Candidates each variable keeps after each epoch's competition."
)
#: Fitter neighbours a candidate's novelty is measured against.
K_NEAREST_FITTER = IntRange(
    1,
    MAX_COUNT,
    help="DNS: a candidate's novelty is its mean distance to this many better candidates.",
)


def cosine_distance_matrix(vectors: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """All pairwise cosine distances ``1 - cos(a, b)`` (in [0, 2]) in one numpy operation.

    A zero vector has no direction: its similarity to everything is taken as 0 (distance 1).
    """
    matrix = np.asarray(vectors, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(
            f"cosine_distance_matrix: expected an (N, D) array, got shape {matrix.shape}"
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    distances = 1.0 - unit @ unit.T
    np.clip(distances, 0.0, 2.0, out=distances)
    np.fill_diagonal(distances, 0.0)
    return distances


def dominated_novelty_scores(
    rewards: Sequence[float] | np.ndarray, distances: np.ndarray, k_nearest_fitter: int
) -> np.ndarray:
    """Competition score of every candidate (see the module docstring).

    ``distances[i, j]`` is the distance between candidates i and j; only entries between a
    candidate and a fitter one are read (others may be NaN).
    """
    reward = np.asarray(rewards, dtype=float)
    count = reward.shape[0]
    distances = np.asarray(distances, dtype=float)
    if distances.shape != (count, count):
        raise ValueError(
            f"dominated_novelty_scores: distances must be {count}x{count}, got {distances.shape}"
        )
    K_NEAREST_FITTER.check("k_nearest_fitter", k_nearest_fitter)
    if count == 0:
        return np.zeros(0)
    fitter = reward[None, :] > reward[:, None]  # fitter[i, j]: j has a higher reward than i
    masked = np.where(fitter, distances, np.inf)
    nearest = np.sort(masked, axis=1)[:, :k_nearest_fitter]
    finite = np.isfinite(nearest)
    used = finite.sum(axis=1)
    total = np.where(finite, nearest, 0.0).sum(axis=1)
    scores = np.divide(total, used, out=np.full(count, UNDOMINATED_SCORE), where=used > 0)
    return scores


def competition(
    rewards: Sequence[float] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    population_size: int,
) -> list[int]:
    """Indices kept: above-median score (or undominated), then the top ``population_size``
    by reward. Ties on reward go to the higher score, then to the earlier candidate."""
    reward = np.asarray(rewards, dtype=float)
    score = np.asarray(scores, dtype=float)
    if reward.shape != score.shape:
        raise ValueError("competition: rewards and scores must have the same length")
    POPULATION_SIZE.check("population_size", population_size)
    if reward.size == 0:
        return []
    undominated = reward >= reward.max()
    survivors = np.flatnonzero((score > np.median(score)) | undominated)
    ranked = sorted(survivors.tolist(), key=lambda i: (-reward[i], -score[i], i))
    return sorted(ranked[:population_size])


def elitism(rewards: Sequence[float] | np.ndarray, population_size: int) -> list[int]:
    """``algorithm="ga"``: no competition, just the top ``population_size`` by reward."""
    POPULATION_SIZE.check("population_size", population_size)
    reward = np.asarray(rewards, dtype=float)
    ranked = sorted(range(reward.size), key=lambda i: (-reward[i], i))
    return sorted(ranked[:population_size])


def dns_select(
    rewards: Sequence[float] | np.ndarray,
    distances: np.ndarray,
    k_nearest_fitter: int,
    population_size: int,
) -> tuple[list[int], np.ndarray]:
    """The whole competition: (kept indices, competition scores)."""
    scores = dominated_novelty_scores(rewards, distances, k_nearest_fitter)
    return competition(rewards, scores, population_size), scores
