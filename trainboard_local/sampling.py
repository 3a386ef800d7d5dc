"""Choosing the next token of a local completion under a grammar, and appending the text the
grammar forces without sampling it.

:class:`TokenSampling` is the part of :class:`~trainboard_local.decoding.Decoder` that
samples; the decoder evaluates prompts and runs the call. Why not llama-cpp-python's own
sampler chain with the grammar in it:

- **Constrained decoding cost ~8× free text.** llama-cpp-python puts the grammar in the
  sampler chain, so for every generated token llama.cpp checks the grammar against all 49,152
  vocabulary entries. Here the token is chosen first, then only that one token is checked
  against the grammar; only when the grammar rejects it is the grammar applied to the whole
  vocabulary (what llama.cpp's own ``common_sampler`` does). At temperature 0 this picks
  exactly the token that full-grammar greedy picks: the best token, when the grammar allows
  it, is also the best allowed token.
- **Most of a structured answer is forced.** With json.dumps's spacing (``grammar.py``) the
  grammar leaves one way to go between two values (``{"team": "`` before the first string,
  ``"}`` after it): decoding and sampling each of those tokens one at a time cost as much as
  the answer itself. Here, whenever the grammar admits a single next character, the forced
  text is found (:meth:`TokenSampling._forced`: the grammar tried on the 256 one-byte tokens),
  tokenised, and appended; its tokens are evaluated in one batch with the token before them
  (with the prompt, for the opening), and once the grammar admits nothing but the end, the
  call ends without evaluating its last token. Only the tokens the model chooses are
  sampled, so at temperature 0 the answer is what the model picks at each of its choices.

A seedless call at temperature > 0 is seeded from the request itself (:func:`request_seed`),
and a seed is never the value llama.cpp reads as "random" (:func:`fixed_seed`).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
from typing import Any

import numpy as np

from trainboard_local.counts import Counts

#: llama-cpp-python's create_chat_completion sampling defaults (kept so answers do not change;
#: its repeat penalty defaults to 1.0, i.e. off).
TOP_K = 40
TOP_P = 0.95
MIN_P = 0.05
#: Tokens the grammar is applied to when the sampled one is rejected (before the whole
#: vocabulary): the best ones by logit.
SHORTLIST = 256
#: The longest forced text looked for at once (bytes); a longer forced run continues after
#: the next evaluation.
MAX_FORCED_BYTES = 64
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

#: llama.cpp's LLAMA_DEFAULT_SEED: to its samplers this value means "pick a random seed".
LLAMA_RANDOM_SEED = 0xFFFFFFFF


def fixed_seed(seed: int) -> int:
    """``seed`` as the 32-bit seed llama.cpp's sampler takes, never the value it reads as
    "random" (``-1``, or a request's hash that happens to be 0xFFFFFFFF): a seed fixes the
    answer."""
    value = seed & 0xFFFFFFFF
    return value - 1 if value == LLAMA_RANDOM_SEED else value


def request_seed(prompt: list[int], temperature: float, top_p: float, grammar: str | None) -> int:
    """A 32-bit sampling seed fixed by the request (prompt tokens, sampling, grammar)."""
    digest = hashlib.blake2b(
        json.dumps([prompt, temperature, top_p, grammar]).encode("utf-8"), digest_size=4
    )
    return int.from_bytes(digest.digest(), "little")


class TokenSampling:
    """Mixin of :class:`~trainboard_local.decoding.Decoder`: it reads the decoder's
    llama.cpp handles, vocabulary buffers and one-byte tokens (set up in its ``__init__``)."""

    def _array(self, logits: np.ndarray) -> Any:
        """``logits`` as a llama.cpp candidate array (the samplers sort it in place, so every
        field is written again)."""
        self._candidates["id"] = self._ids
        self._candidates["logit"] = logits
        self._candidates["p"] = 0.0
        return self._lib.llama_token_data_array(
            data=self._candidates.ctypes.data_as(self._lib.llama_token_data_p),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )

    def _allowed(self, grammar: Any, token: int) -> bool:
        """Whether the grammar accepts ``token`` next (checks this one token only)."""
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 1.0, 0.0
        single = self._lib.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self._lib.llama_sampler_apply(grammar, ctypes.byref(single))
        return not math.isinf(self._one[0].logit)

    def _pick(self, logits: np.ndarray, chain: Any) -> int:
        """One token from ``logits``: greedy (``chain`` None) or ``chain``'s sample."""
        if chain is None:
            return int(np.argmax(logits))
        array = self._array(logits)
        self._lib.llama_sampler_apply(chain, ctypes.byref(array))
        return int(array.data[array.selected].id)

    def _sample(self, logits: np.ndarray, chain: Any, grammar: Any | None, counts: Counts) -> int:
        """Sample, then check the one token against the grammar; on a rejection constrain the
        :data:`SHORTLIST` best tokens, and the whole vocabulary only when too few of them
        are allowed. Each step picks what the grammar applied to the whole vocabulary would:
        greedy needs one allowed token in the shortlist (the best allowed one overall is
        then among them), sampling needs TOP_K of them (then the TOP_K best allowed tokens
        overall, all that top-k keeps, are among them)."""
        token = self._pick(logits, chain)
        if grammar is None:
            return token
        counts.grammar_checks += 1
        if self._allowed(grammar, token):
            return token
        best = np.argpartition(logits, -SHORTLIST)[-SHORTLIST:]
        short = np.zeros(SHORTLIST, dtype=TOKEN_DATA)
        short["id"], short["logit"] = best, logits[best]
        array = self._lib.llama_token_data_array(
            data=short.ctypes.data_as(self._lib.llama_token_data_p),
            size=SHORTLIST,
            selected=-1,
            sorted=False,
        )
        self._lib.llama_sampler_apply(grammar, ctypes.byref(array))
        allowed = np.isfinite(short["logit"])
        if allowed.sum() >= (1 if chain is None else TOP_K):
            masked = np.full_like(logits, -np.inf)
            masked[short["id"][allowed]] = short["logit"][allowed]
        else:
            counts.grammar_full_passes += 1  # constrain the whole vocabulary
            array = self._array(logits)
            self._lib.llama_sampler_apply(grammar, ctypes.byref(array))
            masked = self._candidates["logit"].copy()
        return self._pick(masked, chain)

    def _forced(self, grammar: Any) -> tuple[bytes, bool]:
        """(text, ends): the text the grammar admits as the only way on from its state (up to
        :data:`MAX_FORCED_BYTES`), and whether the output must end after it. The grammar's
        state is left as it was (a copy is advanced)."""
        lib = self._lib
        probe = lib.llama_sampler_clone(grammar)
        text = b""
        eog = self.llama.token_eos()
        try:
            while len(text) < MAX_FORCED_BYTES:
                self._probe["id"][:-1] = [token for token, _ in self._bytes]
                self._probe["id"][-1] = eog
                self._probe["logit"] = 0.0
                array = lib.llama_token_data_array(
                    data=self._probe.ctypes.data_as(lib.llama_token_data_p),
                    size=len(self._probe),
                    selected=-1,
                    sorted=False,
                )
                lib.llama_sampler_apply(probe, ctypes.byref(array))
                allowed = np.flatnonzero(np.isfinite(self._probe["logit"][:-1]))
                ends = bool(np.isfinite(self._probe["logit"][-1]))
                if ends or len(allowed) != 1:
                    return text, ends and len(allowed) == 0
                token, byte = self._bytes[int(allowed[0])]
                lib.llama_sampler_accept(probe, token)
                text += byte
            return text, False
        finally:
            lib.llama_sampler_free(probe)

    def _forced_tokens(self, grammar: Any) -> tuple[list[int], bool]:
        """The forced text (:meth:`_forced`) as tokens, and whether the output ends after
        them; none when its tokens would not spell it exactly (the model then goes on token
        by token). The tokens are not accepted by ``grammar`` yet."""
        if not self.append_forced:
            return [], False
        text, ends = self._forced(grammar)
        if not text:
            return [], ends
        tokens = self.llama.tokenize(text, add_bos=False, special=False)
        if self.llama.detokenize(tokens) != text:
            return [], False
        return tokens, ends

    def _accept_forced(self, grammar: Any, tokens: list[int]) -> None:
        """Advance ``grammar`` over forced ``tokens`` (each checked first: accepting a token
        the grammar refuses aborts llama.cpp)."""
        for token in tokens:
            if not self._allowed_then_accept(grammar, token):
                raise RuntimeError("llama.cpp's grammar refused a token of its own forced text")

    def _allowed_then_accept(self, grammar: Any, token: int) -> bool:
        if not self._allowed(grammar, token):
            return False
        self._lib.llama_sampler_accept(grammar, token)
        return True

    def _chain(self, temperature: float, top_p: float, seed: int) -> Any:
        lib = self._lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(TOP_K))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(top_p, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(MIN_P, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temperature))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed))
        return chain
