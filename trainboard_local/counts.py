"""The token figures of one local completion, counted while it decodes.

Why a module of its own: the decoder (``decoding.py``) starts the count for each call and the
sampling mixin it inherits (``sampling.py``) adds the grammar checks to it; both import it from
here, so ``decoding.py`` imports ``sampling.py`` and never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counts:
    """Token figures of one completion (what bench/local_throughput.py adds up)."""

    prompt_tokens: int = 0
    prompt_tokens_evaluated: int = 0
    completion_tokens: int = 0
    grammar_checks: int = 0
    grammar_full_passes: int = 0
    #: generated tokens the grammar forced: appended without a decode-and-sample step
    forced_tokens: int = 0
    #: llama.cpp evaluations of generated tokens (each a batch of one or more)
    generation_evals: int = 0
    #: free cores the prompt evaluation borrowed (``Decoder._borrowed_cores``)
    borrowed_cores: int = 0


__all__ = ["Counts"]
