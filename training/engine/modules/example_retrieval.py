"""Retrieved few-shot examples: a bounded pool of training examples with their embeddings.

Why: the demonstrations that help a small model most are the ones most like the input (DSPy's
KNNFewShot). A Generator whose state holds a ``retrieval`` pool puts, at each prediction, the
``k`` pool examples nearest to the input into its prompt (``Generator.call``); the
``NearestFewShot`` optimizer builds the pool.

The pool lives in the Generator's ``state`` variable, so it is saved, loaded, versioned and
shown like any other value (JSON only)::

    "retrieval": {
        "k": 4,                          # examples put in each prompt (1..MAX_K)
        "embedding_model": "local/minilm",  # the model that made the vectors
        "vote": true,                    # also tell the LM what the neighbours answered
        "in_prompt": true,               # false: the neighbours only vote (label_decision.py)
        "pool": [{"inputs": {...}, "outputs": {...}, "vector": "<base64 float16>"}],
    }

A vector is the example's embedding as little-endian float16, base64-encoded: 2 bytes a
dimension instead of ~8 characters a JSON number (a 384-dimension MiniLM vector is 1 KiB), and
parsed with ``numpy.frombuffer`` — never unpickled. The limits below bound an imported
program's pool before anything is decoded.

Nearest is cosine similarity over the decoded vectors; ties go to the earlier pool entry and
similarities are rounded first (:data:`SIMILARITY_DECIMALS`), so the choice is the same on
every machine. The input's own row (same ``inputs``) is never retrieved while fitting
(:func:`leaving_out_own_rows`): a candidate scored with its answer in the prompt would look
perfect.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from training.engine.bounds import IntRange

#: Examples in a pool (a program's saved state stays a few hundred KiB with MiniLM vectors).
MAX_POOL_SIZE = 1_000
#: Dimensions of a stored vector (OpenAI's largest embedding is 3072).
MAX_VECTOR_DIMENSIONS = 4_096
#: Examples retrieved into one prompt (a 135M model's context is 4096 tokens).
MAX_K = 32
#: Characters of an input's text sent to the embedding model (MiniLM reads ~256 tokens).
MAX_QUERY_CHARS = 2_000
#: Similarities are rounded to this many decimals before ranking (deterministic ties).
SIMILARITY_DECIMALS = 6
#: Decoded pools a Generator keeps (the candidates being scored at once, not every one).
POOL_CACHE_SIZE = 4
#: Query vectors a Generator remembers (one embedding call per distinct input).
QUERY_CACHE_SIZE = 4_096

K = IntRange(1, MAX_K, help="Nearest training examples put in each prompt.")
POOL_SIZE = IntRange(1, MAX_POOL_SIZE, help="Most training examples kept for retrieval.")

#: base64 of MAX_VECTOR_DIMENSIONS float16 values.
MAX_VECTOR_CHARS = 4 * ((2 * MAX_VECTOR_DIMENSIONS + 2) // 3)


class RetrievalError(ValueError):
    """A retrieval pool that cannot be used (bad vector, mismatched dimensions, too big)."""


def retrieval_schema(inputs_schema: dict, outputs_schema: dict) -> dict[str, Any]:
    """The JSON schema of the ``retrieval`` field of a Generator's state (its bounds)."""
    return {
        "type": "object",
        "description": "Training examples retrieved by similarity to the input (NearestFewShot)",
        "properties": {
            "k": {"type": "integer", "minimum": K.min, "maximum": K.max},
            "embedding_model": {"type": "string", "maxLength": 200},
            "vote": {"type": "boolean"},
            "in_prompt": {"type": "boolean"},
            "pool": {
                "type": "array",
                "maxItems": MAX_POOL_SIZE,
                "items": {
                    "type": "object",
                    "properties": {
                        "inputs": inputs_schema,
                        "outputs": outputs_schema,
                        "vector": {
                            "type": "string",
                            "maxLength": MAX_VECTOR_CHARS,
                            "pattern": "^[A-Za-z0-9+/]*={0,2}$",
                        },
                    },
                    "required": ["inputs", "outputs", "vector"],
                },
            },
        },
        "required": ["k", "pool"],
    }


# -- vectors ---------------------------------------------------------------------------------
def encode_vector(vector: Sequence[float]) -> str:
    """A vector as base64 little-endian float16 (unit-normalised first: cosine is a dot)."""
    array = np.asarray(vector, dtype=np.float64).ravel()
    if array.size == 0 or array.size > MAX_VECTOR_DIMENSIONS:
        raise RetrievalError(
            f"an embedding has {array.size} dimensions; 1 to {MAX_VECTOR_DIMENSIONS} allowed"
        )
    if not np.all(np.isfinite(array)):
        raise RetrievalError("an embedding has a NaN or infinite value")
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / norm
    return base64.b64encode(array.astype("<f2").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    """The float32 vector of :func:`encode_vector`'s text (RetrievalError when malformed)."""
    if not isinstance(text, str) or len(text) > MAX_VECTOR_CHARS:
        raise RetrievalError(
            f"a pool vector must be a base64 string of at most {MAX_VECTOR_CHARS} characters"
        )
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise RetrievalError("a pool vector is not valid base64") from None
    if not raw or len(raw) % 2:
        raise RetrievalError("a pool vector must hold a whole number of float16 values")
    vector = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if not np.all(np.isfinite(vector)):
        raise RetrievalError("a pool vector has a NaN or infinite value")
    return vector


def as_stored(vector: Sequence[float]) -> np.ndarray:
    """``vector`` as the pool stores it (unit, float16, back to float32): an input's query is
    rounded like the pool's vectors, by the Generator and the plain-prompt re-scorer alike."""
    return decode_vector(encode_vector(vector))


def pool_matrix(pool: Sequence[dict[str, Any]]) -> np.ndarray:
    """The pool's vectors as one (N, D) float32 matrix (RetrievalError when they differ)."""
    if len(pool) > MAX_POOL_SIZE:
        raise RetrievalError(f"a retrieval pool holds at most {MAX_POOL_SIZE} examples")
    vectors = [decode_vector(entry["vector"]) for entry in pool]
    sizes = {len(vector) for vector in vectors}
    if len(sizes) > 1:
        raise RetrievalError(f"the pool's vectors have different sizes: {sorted(sizes)}")
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.stack(vectors)
    # Unit rows, whatever a loaded document holds: one crafted long vector would otherwise be
    # the nearest to every input.
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(norms > 0):
        raise RetrievalError("a retrieval pool vector is all zeros")
    return matrix / norms


# -- texts -----------------------------------------------------------------------------------
def retrieval_text(inputs: dict[str, Any]) -> str:
    """What is embedded for an input: its only string field as is (a tweet, a message),
    else one ``name: value`` line per field (keys sorted). Cut at MAX_QUERY_CHARS."""
    values = list(inputs.values())
    if len(values) == 1 and isinstance(values[0], str):
        text = values[0]
    else:
        lines = []
        for name in sorted(inputs):
            value = inputs[name]
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{name}: {shown}")
        text = "\n".join(lines)
    return text[:MAX_QUERY_CHARS]


def same_inputs_key(inputs: dict[str, Any]) -> str:
    """Canonical JSON of an input (what "the same row" means when leaving it out)."""
    return json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- nearest ---------------------------------------------------------------------------------
def nearest_indices(
    matrix: np.ndarray, query: np.ndarray, k: int, exclude: Sequence[int] = ()
) -> list[int]:
    """Indices of the ``k`` rows of ``matrix`` most similar to ``query``, nearest first.

    Cosine similarity (rows are unit vectors; the query is normalised here), rounded to
    SIMILARITY_DECIMALS; ties go to the lower index. ``exclude`` rows are never returned.

    Example:
        >>> nearest_indices(np.eye(3, dtype=np.float32), np.array([0, 1, 0.5]), 2)
        [1, 2]
    """
    if matrix.size == 0 or k <= 0:
        return []
    query = np.asarray(query, dtype=np.float32).ravel()
    if query.shape[0] != matrix.shape[1]:
        raise RetrievalError(
            f"the input's embedding has {query.shape[0]} dimensions, the pool's "
            f"{matrix.shape[1]}: the pool was made with another embedding model"
        )
    norm = float(np.linalg.norm(query))
    if norm > 0:
        query = query / norm
    similarity = np.round(matrix.astype(np.float64) @ query.astype(np.float64), SIMILARITY_DECIMALS)
    excluded = set(exclude)
    # lexsort: last key is primary — by similarity descending, then index ascending
    order = np.lexsort((np.arange(len(similarity)), -similarity))
    return [int(i) for i in order if int(i) not in excluded][:k]


def vote_hint(outputs: Sequence[dict[str, Any]]) -> str:
    """One sentence naming the commonest answer among the retrieved examples (ties: the
    nearest one's), for the system message: a small model copies a stated answer far more
    reliably than it weighs several demonstrations. ``outputs`` are nearest first."""
    if not outputs:
        return ""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for position, output in enumerate(outputs):
        key = json.dumps(output, sort_keys=True, ensure_ascii=False)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, position)
    best = max(counts, key=lambda key: (counts[key], -first[key]))
    return (
        f"The {len(outputs)} most similar solved examples answered {best} "
        f"{counts[best]} time(s) out of {len(outputs)}."
    )


# -- leaving the input's own row out ---------------------------------------------------------
_LEAVE_OUT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "trainboard_retrieval_leave_out", default=False
)


@contextlib.contextmanager
def leaving_out_own_rows() -> Iterator[None]:
    """Inside this block (this asyncio context), a Generator never retrieves a pool example
    with the same inputs as the one it predicts: how a candidate is scored on rows its pool
    holds (a leave-one-out estimate, not a lookup of the answer)."""
    token = _LEAVE_OUT.set(True)
    try:
        yield
    finally:
        _LEAVE_OUT.reset(token)


def leave_out_active() -> bool:
    return _LEAVE_OUT.get()


__all__ = [
    "K",
    "MAX_K",
    "MAX_POOL_SIZE",
    "MAX_QUERY_CHARS",
    "MAX_VECTOR_DIMENSIONS",
    "POOL_SIZE",
    "RetrievalError",
    "as_stored",
    "decode_vector",
    "encode_vector",
    "leave_out_active",
    "leaving_out_own_rows",
    "nearest_indices",
    "pool_matrix",
    "retrieval_schema",
    "retrieval_text",
    "same_inputs_key",
    "vote_hint",
]
