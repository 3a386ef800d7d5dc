"""One chat completion on one llama.cpp instance: the prompt's shared prefix kept, the grammar
checked on one token, the answer fixed by the request.

Why not ``Llama.create_chat_completion``: on a 2-core machine three things made it slow or
unsteady, and each is fixed here with llama.cpp's own low-level API:

- **Constrained decoding cost ~8× free text, and most of a structured answer is forced.**
  The token is chosen first and only it is checked against the grammar, and the text the
  grammar forces is appended without sampling it (:mod:`trainboard_local.sampling`
  says how, and why the answer does not change).
- **Prefix reuse could depend on history.** The instance keeps the keys and values of its last
  prompt and the next call evaluates only what follows the prefix the two share. Measured on
  llama.cpp's CPU backend: a token's logits are bitwise the same however the prompt before it
  was cut into batches, *except* when a batch holds a single token (another matrix kernel,
  other rounding). So only prompt tokens are kept (generated tokens were evaluated one by one),
  and a prompt's new part is always evaluated in batches of at least
  :data:`MIN_BATCH_TOKENS`: an answer is the same whether or not its prefix was held
  (``tests/engine/local/test_local_decoding.py`` checks it on each machine).
- **A prompt can come back after another replaced it, or run on the other instance.**
  OMEGA's mutation calls share their system message (and the start of their user turn), but
  the new candidate's predictions run in between and replace the held prompt; a new
  candidate's first two predictions start together, one on each instance. So the keys/values
  of two prefixes of a prompt are saved as it is evaluated (the prompt cut there into
  batches, which changes no logit): the system message, and the system message with its
  few-shot turns; and a long last turn is saved with its whole prompt. They live in the
  pool's :class:`PrefixStore` (``prefix_store.py``), shared by its decoders: the saved state
  sharing the most leading tokens with a later prompt is restored, into the same cells, and
  cut where the two part (:meth:`Decoder._restore`), and a prefix another decoder is
  evaluating now is waited for rather than evaluated twice (:meth:`_evaluate_prompt`).
- **A seedless sampled call depended on the instance.** llama-cpp-python derives a seedless
  call's seed from the instance's previous seed, so which instance served how many calls
  changed the answers. Here a seedless call at temperature > 0 is seeded from the request
  itself (:func:`~trainboard_local.sampling.request_seed`): the same request gets the same answer whatever the
  scheduling; different requests (another parent, another batch) differ as before.
- **A lone call left the other core idle.** OMEGA's mutation runs alone (nothing else of the
  run can start until it answers), so on two cores one of them idled through its ~350-token
  prompt. When the decoder is given the machine's core slots (``core_slots.py``), a prompt
  evaluation of :data:`MIN_BORROW_TOKENS` or more first borrows the free slots whose cores
  the kernel sees idle, without waiting (``CoreSlots.borrow``: a slot another process holds
  is never taken), evaluates with that many more batch threads (``llama_set_n_threads``),
  then goes back to its own thread count and gives the slots back, also on an error
  (:meth:`Decoder._borrowed_cores`). Generation keeps its own threads: a core borrowed
  through a long answer would make the next call wait for it, and whether one-token steps
  gain from a second thread is not settled (``bench/local_prompt_threads.py`` measures it;
  on this shared machine, at load 3-8, it lost). Measured on llama.cpp's CPU backend, the
  logits are bitwise the same with 1 or 2 batch threads, so the answer does not depend on
  whether a core was free (``tests/engine/local/test_local_decoding.py`` checks it on each
  machine).

Not done: several calls in one decode. A one-token decode costs far less per sequence when
several step together (one context, a key/value stream per sequence, llama.cpp's CPU backend,
one thread: 20.6, 29.7, 41.1 and 64.7 ms for 1, 2, 4 and 8 sequences), so a batch's calls
could share their decodes. Tried, with each answer kept bitwise what
it is alone (equal token counts per sequence in a decode, no prompt cut into a one-token
piece): on 64 demo predictions, 8 at a time, two contexts of 4 sequences used 8.8-9.8 CPU
seconds against 9.2-9.5 for today's two instances (4.9-5.7 s wall against 5.0-5.1 s), one
context of 8 sequences 9.7 s wall on one thread and 13-14.5 s on two (ggml's worker thread and
the calls' Python threads on the same two cores). The calls do not stay in step: prompt
suffixes differ in length (15-23 tokens), a generation step is one token for one call and
three (with forced text) for another, and a decode gathered 1.5-2 calls on average.

Sampling otherwise follows create_chat_completion's defaults (no repeat penalty, top-k 40,
top-p 0.95, min-p 0.05, then the temperature), so answers keep their quality.

Example:
    ```python
    decoder = Decoder(llama)  # a llama_cpp.Llama
    result = decoder.complete([{"role": "user", "content": "Hi"}], temperature=0.0, max_tokens=8)
    result["usage"]["prompt_tokens_evaluated"]  # prompt tokens llama.cpp really evaluated
    ```
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from trainboard_local.counts import Counts
from trainboard_local.prefix_store import CLAIMED, SAVED, PrefixStore, shared_prefix
from trainboard_local.sampling import (
    TOKEN_DATA,
    TOP_P,
    TokenSampling,
    fixed_seed,
    request_seed,
)

#: The fewest prompt tokens evaluated in one llama.cpp batch: a one-token batch is computed by
#: another kernel than a longer one, and its rounding would make an answer depend on where the
#: held prefix ended.
MIN_BATCH_TOKENS = 2
#: Grammars whose forced opening a decoder remembers (the grammar text varies with each call's
#: token budget, so a long-lived worker would otherwise keep one entry per budget ever seen).
OPENINGS_CACHE_SIZE = 64

#: The shortest prefix worth saving (tokens): a shorter one costs little to evaluate.
MIN_SAVED_TOKENS = 64

#: The fewest prompt tokens worth borrowing free cores for: a short evaluation (a user turn
#: after a held prefix, ~10-30 tokens) takes a few tenths of a second on one thread, and a
#: borrowed core makes a call that starts meanwhile wait for it.
MIN_BORROW_TOKENS = 64


def batches(start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into batches of at most ``size`` tokens, none of one token."""
    bounds = [(i, min(i + size, end)) for i in range(start, end, size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < MIN_BATCH_TOKENS:
        (a, _), (_, last) = bounds[-2], bounds[-1]
        bounds[-2:] = [(a, last - MIN_BATCH_TOKENS), (last - MIN_BATCH_TOKENS, last)]
    return bounds


class Decoder(TokenSampling):
    """Chat completions on one ``llama_cpp.Llama`` (not thread-safe: one call at a time).

    Args:
        llama: a loaded ``llama_cpp.Llama``; this class drives its context directly.
        append_forced: append the text a grammar forces without sampling it (True); False
            samples and evaluates every token one by one (what the tests compare with).
        slots: the machine's ``CoreSlots`` (``core_slots.py``), of which the caller holds one
            per thread of ``llama``: a long prompt is evaluated on the free ones too
            (:meth:`_borrowed_cores`). None: always on the instance's own threads.
        prefixes: the saved prompt prefixes this decoder shares with the pool's others
            (``prefix_store.py``); None: a store of its own.
    """

    def __init__(
        self,
        llama: Any,
        append_forced: bool = True,
        slots: Any = None,
        prefixes: PrefixStore | None = None,
    ):
        import llama_cpp
        from llama_cpp import llama_chat_format

        self.llama = llama
        self.append_forced = append_forced
        self.slots = slots
        self._lib = llama_cpp
        ctx = llama._ctx.ctx
        #: the instance's own (generation, batch) threads, what a borrow returns to
        self.threads = (llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx))
        #: how many cores the last prompt evaluation borrowed (bench/tests)
        self.last_borrowed = 0
        self._vocab = llama._model.vocab
        self._n_vocab = llama.n_vocab()
        eos = llama.token_eos()
        self._eos_text = llama._model.token_get_text(eos) if eos != -1 else ""
        bos = llama.token_bos()
        self._formatter = llama_chat_format.Jinja2ChatFormatter(
            template=llama.metadata["tokenizer.chat_template"],
            eos_token=self._eos_text,
            bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )
        #: The prompt tokens whose keys/values this instance holds (its last prompt).
        self.held: list[int] = []
        #: Saved keys/values of recent prompt prefixes (a system message; a system message and
        #: its examples), shared with the pool's other decoders: restored when a prompt starts
        #: with one and shares less with ``held``.
        self.saved = prefixes if prefixes is not None else PrefixStore()
        self._turn_end = llama.token_eos()
        self._candidates = np.zeros(self._n_vocab, dtype=TOKEN_DATA)
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._bytes = self._byte_tokens()
        self._probe = np.zeros(len(self._bytes) + 1, dtype=TOKEN_DATA)
        #: the forced opening of each grammar (the same for every call with that schema)
        self._openings: dict[str, tuple[list[int], bool]] = {}

    def _byte_tokens(self) -> list[tuple[int, bytes]]:
        """(token, byte) for the tokens whose text is one byte, one per byte: every text
        starts with one of them, so they are what a grammar's next character is tried on."""
        buffer = ctypes.create_string_buffer(8)
        found: dict[bytes, int] = {}
        for token in range(self._n_vocab):
            if self._lib.llama_vocab_is_control(self._vocab, token):
                continue
            size = self._lib.llama_token_to_piece(self._vocab, token, buffer, 8, 0, False)
            if size == 1 and buffer.raw[:1] not in found:
                found[buffer.raw[:1]] = token
        return [(token, byte) for byte, token in sorted(found.items())]

    # -- the prompt --------------------------------------------------------------------------
    def prompt_tokens(self, messages: list[dict]) -> list[int]:
        """The chat template applied and tokenised exactly as create_chat_completion does."""
        formatted = self._formatter(messages=messages)
        return self.llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )

    def reusable(self, prompt: list[int]) -> int:
        """How many leading tokens of ``prompt`` this decoder need not evaluate: the prefix it
        shares with the held prompt, or with a saved one (what the pool routes by)."""
        return max(shared_prefix(self.held, prompt), self.saved.nearest(prompt)[1])

    def _cuts(self, prompt: list[int]) -> list[int]:
        """Where ``prompt``'s prefixes worth saving end: after the system message, and after
        the turn before the last user turn (the system message and its few-shot examples:
        what every prediction of one candidate shares), each of MIN_SAVED_TOKENS or more and
        leaving at least MIN_BATCH_TOKENS to evaluate."""
        ends = [i + 1 for i, token in enumerate(prompt) if token == self._turn_end]
        cuts = {ends[0], ends[-2]} if len(ends) >= 2 else set(ends)
        limit = len(prompt) - MIN_BATCH_TOKENS
        return sorted(cut for cut in cuts if MIN_SAVED_TOKENS <= cut <= limit)

    def _restore(self, key: tuple[int, ...]) -> bool:
        """Make the instance hold the saved prefix ``key`` (and nothing after it), from its
        state in the store (saved by this decoder or another of the pool): its cells go
        where evaluating it had put them, so what follows is computed on the same cache as
        on a fresh evaluation. Returns False when the state is gone (another decoder's save
        dropped it meanwhile: the instance holds what it held) or llama.cpp refuses it (it
        is dropped from the store, and the instance holds nothing)."""
        try:
            state = self.saved.get(key)
        except KeyError:
            return False
        lib, ctx = self._lib, self.llama._ctx.ctx
        # Held nothing from here on: a failed restore must not leave the next call reusing
        # cells that are gone (it would answer without its prefix, and nothing would say so).
        self.held, self.llama.n_tokens = [], 0
        lib.llama_memory_seq_rm(lib.llama_get_memory(ctx), 0, -1, -1)
        if lib.llama_state_seq_set_data(ctx, state, len(state), 0) == 0:
            self.saved.drop(key)
            return False
        self.llama.n_tokens = len(key)
        self.llama.input_ids[: len(key)] = key
        return True

    def _save(self, key: tuple[int, ...], whole: bool = False) -> None:
        """Keep the instance's keys/values (exactly ``key``'s tokens now) under ``key``
        (``whole``: a whole prompt, see ``PrefixStore.put``); not when larger than the store
        keeps."""
        lib, ctx = self._lib, self.llama._ctx.ctx
        size = lib.llama_state_seq_get_size(ctx, 0)
        if size > self.saved.max_bytes:
            return
        state = (ctypes.c_uint8 * size)()
        if lib.llama_state_seq_get_data(ctx, state, size, 0) == size:
            self.saved.put(key, state, whole=whole)

    @contextlib.contextmanager
    def _borrowed_cores(self, tokens: int) -> Iterator[int]:
        """Evaluate ``tokens`` prompt tokens on every core that is free now besides the
        caller's own (``CoreSlots.borrow``: a free slot, and idle by the kernel's count);
        yields how many were borrowed. Never waits; the slots and the thread count are given
        back when the block ends, however it ends."""
        borrowed: list[int] = []
        if self.slots is not None and tokens >= MIN_BORROW_TOKENS:
            borrowed = self.slots.borrow(self.threads[1])
        ctx = self.llama._ctx.ctx
        self.last_borrowed = len(borrowed)
        try:
            if borrowed:
                self._lib.llama_set_n_threads(ctx, self.threads[0], self.threads[1] + len(borrowed))
            yield len(borrowed)
        finally:
            if borrowed:
                self._lib.llama_set_n_threads(ctx, *self.threads)
                for slot in borrowed:
                    self.slots.give_back(slot)

    def _evaluate_prompt(
        self, prompt: list[int], opening: list[int], cancelled: threading.Event | None = None
    ) -> int:
        """What follows the held prefix evaluated (:meth:`_evaluate_new`), on borrowed cores
        when it is long and some are free (:meth:`_borrowed_cores`).

        First the prefixes worth saving (:meth:`_cuts`) that this decoder does not hold are
        claimed in the pool's store, longest first, each in one step
        (``PrefixStore.claim_or_wait``): a saved one is restored instead; one another decoder
        is evaluating now is waited for (only while this call holds no claim, and after a
        wait nothing shorter is claimed), then restored. A call cancelled meanwhile evaluates
        nothing (its caller is gone)."""
        held, _ = self._reuse(prompt)  # held here or saved: nothing to claim up to there
        mine: list[int] = []
        try:
            for cut in reversed(self._cuts(prompt)):
                if cut - held < MIN_BATCH_TOKENS:
                    break
                key = tuple(prompt[:cut])
                found = self.saved.claim_or_wait(key, wait=not mine, cancelled=cancelled)
                if found == CLAIMED:
                    mine.append(cut)
                elif found == SAVED or not mine:
                    break  # a longer saved prefix, or a wait ended: nothing shorter to claim
            if cancelled is not None and cancelled.is_set():
                return 0
            reuse, _ = self._reuse(prompt)
            with self._borrowed_cores(len(prompt) + len(opening) - reuse):
                return self._evaluate_new(prompt, opening, mine)
        finally:
            for cut in mine:  # a saved one's claim ended when it was saved
                self.saved.release(tuple(prompt[:cut]))

    def _reuse(self, prompt: list[int], stored: bool = True) -> tuple[int, tuple[int, ...] | None]:
        """(prompt tokens not evaluated again, the saved prefix to restore first or None): the
        held prefix or a longer saved one (``stored``), leaving at least MIN_BATCH_TOKENS."""
        limit = len(prompt) - MIN_BATCH_TOKENS
        reuse = max(min(shared_prefix(self.held, prompt), limit), 0)
        saved, common = self.saved.nearest(prompt) if stored else (None, 0)
        if saved is not None and min(common, limit) > reuse:
            return min(common, limit), saved  # restored, then cut there (Llama.eval drops the rest)
        return reuse, None

    def _evaluate_new(self, prompt: list[int], opening: list[int], save: list[int] = ()) -> int:
        """Evaluate what follows the held prefix or a longer saved prefix (at least
        MIN_BATCH_TOKENS of it, in batches of at least that many), then the answer's forced
        ``opening`` in the same batches; the prefixes ending at the cuts in ``save`` are saved
        on the way (each part evaluated is MIN_BATCH_TOKENS or more: the prompt cut there
        changes no logit). A saved prefix that vanished from the store meanwhile, or that
        llama.cpp refuses (then dropped), gives way to the next-nearest one, else to the held
        prefix. Returns how many prompt tokens were evaluated."""
        reuse, saved = self._reuse(prompt)
        # a vanished or refused state: the next nearest (bounded: other decoders save meanwhile)
        for _ in range(len(self.saved) + 1):
            if saved is None or self._restore(saved):
                break
            reuse, saved = self._reuse(prompt)
        else:
            reuse, saved = self._reuse(prompt, stored=False)
        self.llama.n_tokens = reuse
        self.held = prompt[:reuse]
        tokens = prompt + opening
        start = reuse
        for cut in sorted(save):
            if cut - start < MIN_BATCH_TOKENS or cut > len(prompt) - MIN_BATCH_TOKENS:
                continue
            for a, b in batches(start, cut, self.llama.n_batch):
                self.llama.eval(tokens[a:b])
            self._save(tuple(prompt[:cut]))
            start = cut
        for a, b in batches(start, len(tokens), self.llama.n_batch):
            self.llama.eval(tokens[a:b])
        if len(prompt) - start >= MIN_SAVED_TOKENS:  # a long last turn: saved with its prompt
            self._save(tuple(tokens), whole=True)
        self.held = list(prompt)
        return len(prompt) - reuse

    def _logits(self) -> np.ndarray:
        pointer = self._lib.llama_get_logits_ith(self.llama._ctx.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).copy()

    # -- the call ----------------------------------------------------------------------------
    def complete(
        self,
        messages: list[dict],
        *,
        temperature: float = 0.2,
        max_tokens: int = 512,
        seed: int | None = None,
        top_p: float | None = None,
        stop: list[str] | str | None = None,
        grammar: str | None = None,
        cancelled: threading.Event | None = None,
    ) -> dict:
        """One chat completion; returns the OpenAI-shaped dict create_chat_completion returns,
        with ``usage.prompt_tokens_evaluated`` (prompt tokens not taken from the held prefix).

        ``cancelled``, once set (the awaiting call was cancelled or timed out), stops the
        generation at the next token: nobody waits for the answer, and the decoder and the
        machine's cores go back to the calls that do.

        Raises ValueError (naming the context window) when the prompt does not fit.
        """
        lib = self._lib
        prompt = self.prompt_tokens(messages)
        n_ctx = self.llama.n_ctx()
        if len(prompt) >= n_ctx:
            raise ValueError(f"Requested tokens ({len(prompt)}) exceed context window of {n_ctx}")
        max_tokens = min(max_tokens, n_ctx - len(prompt)) if max_tokens > 0 else n_ctx - len(prompt)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        watch = [s for s in stops if s]  # the end-of-turn text is an end-of-generation token
        stops.append(self._eos_text)
        top_p = TOP_P if top_p is None else float(top_p)
        counts = Counts(prompt_tokens=len(prompt))
        chain = None
        if temperature > 0:
            if seed is None:
                seed = request_seed(prompt, temperature, top_p, grammar)
            chain = self._chain(float(temperature), top_p, fixed_seed(int(seed)))
        sampler = None
        if grammar is not None:
            sampler = lib.llama_sampler_init_grammar(self._vocab, grammar.encode("utf-8"), b"root")
            if not sampler:
                raise ValueError("llama.cpp refused the grammar built from the JSON schema")
        generated: list[int] = []
        finish_reason = "length"
        try:
            opening, ends = [], False
            if sampler is not None:
                if grammar not in self._openings:
                    if len(self._openings) >= OPENINGS_CACHE_SIZE:
                        del self._openings[next(iter(self._openings))]  # the oldest
                    self._openings[grammar] = self._forced_tokens(sampler)
                opening, ends = self._openings[grammar]
                opening = opening[:max_tokens]
                self._accept_forced(sampler, opening)
            started = time.perf_counter()
            counts.prompt_tokens_evaluated = self._evaluate_prompt(prompt, opening, cancelled)
            counts.borrowed_cores = self.last_borrowed
            prompt_seconds = time.perf_counter() - started
            generated.extend(opening)
            counts.forced_tokens += len(opening)
            if ends and len(opening) < max_tokens:
                finish_reason = "stop"
            while finish_reason == "length" and len(generated) < max_tokens:
                if cancelled is not None and cancelled.is_set():
                    finish_reason = "cancelled"
                    break
                logits = self._logits()
                token = self._sample(logits, chain, sampler, counts)
                if lib.llama_vocab_is_eog(self._vocab, token):
                    finish_reason = "stop"
                    break
                step = [token]
                if sampler is not None:
                    lib.llama_sampler_accept(sampler, token)
                    forced, ends = self._forced_tokens(sampler)
                    forced = forced[: max_tokens - len(generated) - 1]
                    self._accept_forced(sampler, forced)
                    counts.forced_tokens += len(forced)
                    step += forced
                    if ends and len(generated) + len(step) < max_tokens:
                        finish_reason = "stop"  # nothing but the end can follow
                generated.extend(step)
                if watch and any(
                    s.encode("utf-8") in self.llama.detokenize(generated, prev_tokens=prompt)
                    for s in watch
                ):
                    finish_reason = "stop"
                if finish_reason == "length" and len(generated) < max_tokens:
                    self.llama.eval(step)
                    counts.generation_evals += 1
        finally:
            if sampler is not None:
                lib.llama_sampler_free(sampler)
            if chain is not None:
                lib.llama_sampler_free(chain)
        generation_seconds = time.perf_counter() - started - prompt_seconds
        text = self.llama.detokenize(generated, prev_tokens=prompt)
        content = text.decode("utf-8", errors="ignore")
        for s in stops:
            if s and s in content:
                content = content[: content.index(s)]
        counts.completion_tokens = len(generated)
        return {
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": counts.prompt_tokens,
                "completion_tokens": counts.completion_tokens,
                "total_tokens": counts.prompt_tokens + counts.completion_tokens,
                "prompt_tokens_evaluated": counts.prompt_tokens_evaluated,
                "grammar_checks": counts.grammar_checks,
                "grammar_full_passes": counts.grammar_full_passes,
                "forced_tokens": counts.forced_tokens,
                "generation_evals": counts.generation_evals,
                "borrowed_cores": counts.borrowed_cores,
            },
            # where the call's time went (bench/local_throughput.py)
            "timings": {"prompt_seconds": prompt_seconds, "generation_seconds": generation_seconds},
        }
