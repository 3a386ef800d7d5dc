"""Two-dimensional views of candidate embeddings (numpy only).

The dashboard's population map places each optimizer candidate by a PCA projection of the
embedding DNS already computed for it; the engine bounds what it hands out with
:func:`compact_embedding` so a candidate event never carries an unbounded vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: At most this many numbers of an embedding travel in a candidate event. Larger vectors are
#: reduced by a fixed random projection (distances are kept approximately: Johnson-Lindenstrauss),
#: which is all a 2-D map needs.
MAX_EMBEDDING_DIMS = 512
#: Decimals kept of each number (a 512-vector is then about 4.5 kB of JSON; MiniLM's 384
#: numbers pass unchanged).
EMBEDDING_DECIMALS = 5


@dataclass(frozen=True)
class Projection:
    """The result of :func:`pca_2d`.

    Args:
        coords: ``(N, 2)`` array, the points on the first two principal components.
        explained: the fraction of the total variance each of the two components explains
            (0 for a component that does not exist, e.g. with fewer than 3 points).
    """

    coords: np.ndarray
    explained: tuple[float, float]


def pca_2d(vectors: Sequence[Sequence[float]] | np.ndarray) -> Projection:
    """Project ``N`` vectors onto their first two principal components.

    Deterministic: each component's sign is fixed so that its largest loading is positive,
    so a map redrawn with one more point does not flip. Fewer than two distinct points give
    all-zero coordinates.

    Args:
        vectors: ``(N, D)`` numbers (N may be 0).

    Returns:
        A :class:`Projection`.

    Example:
        >>> p = pca_2d([[0, 0, 0], [2, 0, 0], [0, 1, 0]])
        >>> p.coords.shape, round(sum(p.explained), 3)
        ((3, 2), 1.0)
    """
    matrix = np.asarray(vectors, dtype=float)
    if matrix.size == 0:
        return Projection(np.zeros((len(matrix), 2)), (0.0, 0.0))
    if matrix.ndim != 2:
        raise ValueError(f"pca_2d: expected an (N, D) array, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError("pca_2d: the vectors hold NaN or infinite values")
    centred = matrix - matrix.mean(axis=0)
    total = float((centred**2).sum())
    coords = np.zeros((matrix.shape[0], 2))
    if total <= 1e-18:
        return Projection(coords, (0.0, 0.0))
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    explained = [0.0, 0.0]
    for index in range(min(2, components.shape[0])):
        component = components[index]
        if component[np.argmax(np.abs(component))] < 0:
            component = -component
        coords[:, index] = centred @ component
        explained[index] = float(singular[index] ** 2 / total)
    return Projection(coords, (explained[0], explained[1]))


def compact_embedding(
    vector: Sequence[float] | np.ndarray, max_dims: int = MAX_EMBEDDING_DIMS
) -> list[float]:
    """A bounded copy of an embedding: at most ``max_dims`` rounded numbers.

    A longer vector is multiplied by a Gaussian matrix seeded by its length (the same for
    every vector of one model, so the reduced vectors stay comparable).

    Args:
        vector: one embedding.
        max_dims: the most numbers returned.

    Returns:
        A list of floats (JSON-ready).

    Example:
        >>> len(compact_embedding([0.1] * 1536))
        512
    """
    values = np.asarray(vector, dtype=float).ravel()
    dims = values.shape[0]
    if dims > max_dims:
        values = values @ _reducer(dims, max_dims)
    values = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
    return [round(float(v), EMBEDDING_DECIMALS) for v in values]


@lru_cache(maxsize=4)
def _reducer(dims: int, max_dims: int) -> np.ndarray:
    matrix = np.random.default_rng(dims).standard_normal((dims, max_dims)) / np.sqrt(max_dims)
    matrix.setflags(write=False)
    return matrix


__all__ = ["EMBEDDING_DECIMALS", "MAX_EMBEDDING_DIMS", "Projection", "compact_embedding", "pca_2d"]
