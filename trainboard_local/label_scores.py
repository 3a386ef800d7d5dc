"""Label scores on one llama.cpp instance: each label's whole continuation, the prompt
evaluated once (what ``LanguageModel.score_labels`` asks of the local model).

The prompt and the answer's opening (``{"label": "``) are evaluated as a completion's are
(:meth:`Decoder._evaluate_prompt`: the held or a saved prefix reused); each continuation
(``anger"}``) is then evaluated in one batch after them, with the logits of every position, and
its score is the sum of its tokens' log-probabilities. Nothing is sampled, so a score depends
only on the request: a continuation is always evaluated the same way after the same prefix
(``tests/engine/local/test_local_label_scores.py`` checks it equals a reference evaluation
exactly).

Example:
    ```python
    result = score(decoder, messages, '{"label": "', ['anger"}', 'joy"}'])
    result["scores"]  # [-2.31, -0.18]
    ```
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    values = np.asarray(logits, dtype=np.float64)
    shifted = values - values.max()
    return shifted - np.log(np.exp(shifted).sum())


def _continuation_logits(decoder: Any, start: int, tokens: list[int]) -> np.ndarray:
    """The logits after each of ``tokens``, evaluated in one batch at position ``start``
    (what the instance held past it is dropped first): row i is the distribution of the
    token that follows ``tokens[i]``."""
    llama = decoder.llama
    llama.n_tokens = start
    llama._ctx.kv_cache_seq_rm(-1, start, -1)
    llama._batch.set_batch(batch=tokens, n_past=start, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.n_tokens = start + len(tokens)
    rows = [
        np.ctypeslib.as_array(
            decoder._lib.llama_get_logits_ith(llama._ctx.ctx, i), shape=(decoder._n_vocab,)
        )
        for i in range(len(tokens))
    ]
    return np.array(rows, dtype=np.float64)


def score(
    decoder: Any,
    messages: list[dict],
    opening: str,
    continuations: list[str],
    cancelled: threading.Event | None = None,
) -> dict:
    """The log-probability of each of ``continuations`` as the answer's text after
    ``opening``, on ``decoder`` (a :class:`~trainboard_local.decoding.Decoder`).

    Returns ``{"scores": [...], "usage": {...}, "timings": {...}}``; a call cancelled
    meanwhile returns no scores. Raises ValueError (naming the context window) when the
    prompt does not fit.
    """
    llama = decoder.llama
    prompt = decoder.prompt_tokens(messages)
    opening_tokens = llama.tokenize(opening.encode("utf-8"), add_bos=False, special=False)
    pieces = [
        llama.tokenize(text.encode("utf-8"), add_bos=False, special=False) for text in continuations
    ]
    longest = max((len(piece) for piece in pieces), default=0)
    needed = len(prompt) + len(opening_tokens) + longest
    if needed >= llama.n_ctx():
        raise ValueError(f"Requested tokens ({needed}) exceed context window of {llama.n_ctx()}")
    started = time.perf_counter()
    evaluated = decoder._evaluate_prompt(prompt, opening_tokens, cancelled)
    first = log_softmax(decoder._logits())
    start = len(prompt) + len(opening_tokens)
    scores: list[float] = []
    evals = 0
    for piece in pieces:
        if cancelled is not None and cancelled.is_set():
            return {"scores": [], "usage": {"prompt_tokens": len(prompt)}}
        total = float(first[piece[0]]) if piece else 0.0
        if len(piece) > 1:
            rows = _continuation_logits(decoder, start, piece[:-1])
            evals += 1
            for row, token in zip(rows, piece[1:], strict=True):
                total += float(log_softmax(row)[token])
        scores.append(total)
    llama.n_tokens = len(prompt)  # only the prompt is held (``Decoder.held``)
    return {
        "scores": scores,
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": sum(len(piece) for piece in pieces),
            "prompt_tokens_evaluated": evaluated,
            "generation_evals": evals,
        },
        "timings": {"prompt_seconds": time.perf_counter() - started},
    }
