"""A linear read-out of an input's embedding: each label's score as a dot product.

Why: on label tasks with about a hundred training rows, a ridge read-out of the MiniLM
embedding names the label better than the nearest rows' vote or the small LM's scores (four
TweetEval tasks, 80 fitting rows, 10 draws each: mean test accuracy 0.631 for the read-out,
0.627 for a logistic regression, against 0.587 for a 5-nearest vote), and it is cheap: one
linear solve, no LM call, the input embedded once (the vote embeds it anyway). It is one more
piece of evidence ``label_decision`` weighs, with a weight learned like the others, so a task
on which it says nothing gives it none.

Ridge: least squares from the (unit) vectors to each row's centred target distribution, plus
``RIDGE`` × |W|², the intercepts unpenalised; solved in the rows' space when there are fewer
rows than dimensions (the usual case). Stored in a decision as JSON like the retrieval pool's
vectors (``example_retrieval.encode_vector``: a unit direction as base64 float16, its norm
apart)::

    "readout": {"embedding_model": "local/minilm",
                "weights": {"anger": "<base64>", ...}, "norms": {"anger": 2.1, ...},
                "intercepts": {"anger": 0.05, ...}}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from training.engine.modules import example_retrieval as retrieval

#: The L2 strength (on unit vectors). Measured on the four TweetEval tasks × 10 draws: 0.3,
#: 1 and 3 gave 0.627, 0.631 and 0.606 mean test accuracy.
RIDGE = 1.0
#: What the ridge scores are multiplied by: they span about a tenth of the LM's log-probabilities,
#: and the decision's penalty holds every weight to that scale (measured on sentiment, 15
#: draws: ×1 0.499, ×5 0.530, ×10 0.536, a logistic regression's log-probabilities 0.540).
SCALE = 10.0
#: Largest norm or intercept a stored read-out may hold (a loaded document is bounded).
MAX_NUMBER = 100.0


def fit_readout(vectors: Any, targets: Any, ridge: float = RIDGE) -> tuple[np.ndarray, np.ndarray]:
    """(weights (dimensions, labels), intercepts (labels,)) of the ridge read-out from
    ``vectors`` (rows, dimensions) to ``targets`` (rows, labels: each row's distribution over
    the labels it should answer)."""
    x = np.asarray(vectors, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    x_mean, t_mean = x.mean(axis=0), t.mean(axis=0)
    xc, tc = x - x_mean, t - t_mean
    rows, dimensions = xc.shape
    if rows < dimensions:  # W = Xᵀ (X Xᵀ + λ I)⁻¹ T: an (rows × rows) solve
        weights = xc.T @ np.linalg.solve(xc @ xc.T + ridge * np.eye(rows), tc)
    else:
        weights = np.linalg.solve(xc.T @ xc + ridge * np.eye(dimensions), xc.T @ tc)
    return weights, t_mean - x_mean @ weights


def readout_scores(weights: np.ndarray, intercepts: np.ndarray, vectors: Any) -> np.ndarray:
    """Each label's read-out score for each of ``vectors`` (rows, labels), on the scale of
    the LM's log-probabilities (``SCALE``)."""
    return SCALE * (np.asarray(vectors, dtype=np.float64) @ weights + intercepts)


def out_of_fold(vectors: Any, targets: Any, folds: Sequence[Sequence[int]]) -> np.ndarray:
    """Each row's read-out scores from a read-out fitted without its fold: what a decision
    learns its weight on (a row's own fit would flatter it)."""
    x = np.asarray(vectors, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    scores = np.zeros(t.shape)
    for fold in folds:
        held = np.zeros(len(x), dtype=bool)
        held[list(fold)] = True
        if held.all() or not held.any():
            continue
        weights, intercepts = fit_readout(x[~held], t[~held])
        scores[held] = readout_scores(weights, intercepts, x[held])
    return scores


def to_json(
    weights: np.ndarray, intercepts: np.ndarray, labels: Sequence[str], embedding_model: str
) -> dict[str, Any]:
    """The read-out as a decision stores it (see the module docstring)."""
    norms = np.clip(np.linalg.norm(weights, axis=0), 0.0, MAX_NUMBER)
    intercepts = np.clip(intercepts, -MAX_NUMBER, MAX_NUMBER)  # what from_json accepts
    return {
        "embedding_model": embedding_model,
        "weights": {
            label: retrieval.encode_vector(weights[:, i]) for i, label in enumerate(labels)
        },
        "norms": {label: round(float(norms[i]), 6) for i, label in enumerate(labels)},
        "intercepts": {label: round(float(intercepts[i]), 6) for i, label in enumerate(labels)},
    }


def from_json(readout: Any, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(weights, intercepts) of a stored read-out; ValueError saying what is wrong when it
    does not name exactly ``labels``, a number is out of bounds or the vectors differ in
    size."""
    if not isinstance(readout, dict):
        raise ValueError("a read-out is an object with weights, norms and intercepts")
    parts = [readout.get(key) for key in ("weights", "norms", "intercepts")]
    if not all(isinstance(part, dict) and set(part) == set(labels) for part in parts):
        raise ValueError(f"a read-out's weights, norms and intercepts name exactly {list(labels)}")
    weights_by_label, norms, intercepts = parts
    for number in [*norms.values(), *intercepts.values()]:
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not math.isfinite(number)
            or abs(number) > MAX_NUMBER
        ):
            raise ValueError(
                f"a read-out's norms and intercepts are numbers within ±{MAX_NUMBER:g}"
            )
    try:
        columns = [
            retrieval.decode_vector(weights_by_label[label]) * float(norms[label])
            for label in labels
        ]
    except retrieval.RetrievalError as exc:
        raise ValueError(f"a read-out's weights: {exc}") from None
    if len({len(column) for column in columns}) > 1:
        raise ValueError("a read-out's weights differ in size")
    return (
        np.stack(columns, axis=1).astype(np.float64),
        np.array([float(intercepts[label]) for label in labels]),
    )


def readout_schema() -> dict[str, Any]:
    """The JSON schema of a decision's ``readout`` (its bounds)."""
    number = {"type": "number", "minimum": -MAX_NUMBER, "maximum": MAX_NUMBER}
    vector = {"type": "string", "maxLength": retrieval.MAX_VECTOR_CHARS}
    return {
        "type": "object",
        "description": "A linear read-out of the input's embedding (label_readout.py)",
        "properties": {
            "embedding_model": {"type": "string", "maxLength": 200},
            "weights": {"type": "object", "additionalProperties": vector},
            "norms": {"type": "object", "additionalProperties": number},
            "intercepts": {"type": "object", "additionalProperties": number},
        },
        "required": ["embedding_model", "weights", "norms", "intercepts"],
    }


__all__ = ["fit_readout", "from_json", "out_of_fold", "readout_schema", "readout_scores", "to_json"]
