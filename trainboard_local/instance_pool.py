"""The idle llama.cpp decoders of a process, handed out by the prompt prefix they hold.

A decoder keeps the keys and values of its last prompt (see ``decoding.py``), so
a call whose prompt shares that prefix (the same system prompt, instructions, few-shot examples
and output format: every prediction of one candidate program) only evaluates its own input.
Handing calls to *any* idle instance, as a plain queue does, makes the candidates' prompts
alternate on each instance and throws that prefix away; here a call takes the idle decoder that
shares the longest prefix with its prompt, held or among the saved prefixes (shared by the
pool's decoders, ``prefix_store.py``; ``Decoder.reusable``), then the one holding more of it,
then the first in load order, so the choice depends only on what the decoders hold, never on
timing.

Example:
    ```python
    pool = InstancePool([Decoder(llama_a), Decoder(llama_b)])
    decoder = pool.take(messages)
    try:
        decoder.complete(messages)
    finally:
        pool.give_back(decoder)
    ```
"""

from __future__ import annotations

import threading
from typing import Any

from trainboard_local.prefix_store import shared_prefix


class InstancePool:
    """Decoders lent one call at a time (a llama.cpp context is not thread-safe).

    Args:
        decoders: the loaded ``Decoder`` objects, in load order.
    """

    def __init__(self, decoders: list[Any]):
        self.decoders = list(decoders)
        self._idle = list(decoders)
        self._ready = threading.Condition()

    def __len__(self) -> int:
        return len(self.decoders)

    def take(self, messages: list[dict] | None = None) -> Any:
        """The idle decoder holding the longest prefix of ``messages``' prompt (blocks while
        none is idle)."""
        with self._ready:
            while not self._idle:
                self._ready.wait()
            best = self._idle[0]
            if messages is not None and len(self._idle) > 1:
                prompt = best.prompt_tokens(messages)
                # the pool's decoders share their saved prefixes: on a tie, the one holding it
                best = max(
                    self._idle,
                    key=lambda d: (d.reusable(prompt), shared_prefix(d.held, prompt)),
                )
            self._idle.remove(best)
            return best

    def give_back(self, decoder: Any) -> None:
        with self._ready:
            self._idle.append(decoder)
            self._idle.sort(key=self.decoders.index)
            self._ready.notify()
