"""Saved keys/values of prompt prefixes, shared by the decoders of one pool.

Every prediction of a candidate program starts with the same prefix (the system message with
its instructions, then its few-shot examples as turns); only the last user turn differs. When a
new candidate's batch starts, its first two calls run at once, one on each instance, and each
evaluated that prefix (~80-170 tokens, ~18 % of a local demo fit's prompt tokens).
Here the first decoder to reach a prefix *claims* it, evaluates it and saves llama.cpp's
sequence state under it (``Decoder._save``); a decoder that reaches the same prefix meanwhile
waits for it and restores that state into its own context instead of evaluating it again
(``Decoder._restore``). A state restored into a cleared context lands in the cells evaluating
it would have used, with the same keys and values bit for bit (same weights, same kernels), so
the answer does not depend on which instance evaluated the prefix
(``tests/engine/local/test_local_decoding.py`` checks it).

A long last turn is saved with its prompt too (``Decoder._evaluate_new``): OMEGA's next
mutation prompt shares its start (the variable's description, the parent's instructions), and
a saved state serves any prompt that shares its first tokens: restored, then cut where the two
part. The store keeps the :data:`SAVED_PREFIXES` most recently used, at most
:data:`SAVED_BYTES` of them (~23 KB a token), and one whole prompt among them.

Example:
    ```python
    store = PrefixStore()
    decoders = [Decoder(llama_a, prefixes=store), Decoder(llama_b, prefixes=store)]
    ```
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

#: Prefixes a pool keeps (the oldest used is dropped first): OMEGA's mutation system message
#: and last prompt, and the system message and examples of the last candidates.
SAVED_PREFIXES = 6
#: And at most this many bytes of them (~23 KB a token: a 550-token mutation prompt is ~13 MB,
#: a prompt filling a 4096-token context ~94 MB, which is then not kept).
SAVED_BYTES = 64 << 20
#: The longest a decoder waits for a prefix another decoder is evaluating (seconds); after
#: that it evaluates the prefix itself (the answer is the same either way).
PENDING_WAIT_SECONDS = 60.0
#: How often a waiting decoder looks whether its call was cancelled (seconds).
WAIT_SLICE_SECONDS = 0.25

Key = tuple[int, ...]

#: What :meth:`PrefixStore.claim_or_wait` found.
SAVED, CLAIMED, BUSY = "saved", "claimed", "busy"


def shared_prefix(held: Sequence[int], prompt: Sequence[int]) -> int:
    """How many leading tokens ``prompt`` shares with ``held``."""
    common = 0
    for a, b in zip(held, prompt, strict=False):
        if a != b:
            break
        common += 1
    return common


class PrefixStore:
    """Prompt prefixes' saved states, and the prefixes a decoder is evaluating now.

    Thread-safe: a pool's decoders run in different threads.

    Args:
        size: how many saved prefixes are kept.
        max_bytes: how many bytes of saved states are kept at most (a larger one is not).
    """

    def __init__(self, size: int = SAVED_PREFIXES, max_bytes: int = SAVED_BYTES):
        self.size = size
        self.max_bytes = max_bytes
        self._states: OrderedDict[Key, Any] = OrderedDict()
        self._pending: set[Key] = set()
        self._whole: Key | None = None  # the one whole prompt kept
        self._changed = threading.Condition()

    def __len__(self) -> int:
        with self._changed:
            return len(self._states)

    def __contains__(self, key: Key) -> bool:
        with self._changed:
            return key in self._states

    def keys(self) -> list[Key]:
        with self._changed:
            return list(self._states)

    def nearest(self, prompt: list[int]) -> tuple[Key | None, int]:
        """The saved prefix that shares the most leading tokens with ``prompt``, and how many
        (``(None, 0)``: none shares any); on a tie the shorter (less to copy back). Its state
        restored, the cells past the shared part are dropped, as for a held prompt
        (``Decoder._reuse``)."""
        with self._changed:
            keys = sorted(self._states, key=len)
        best, most = None, 0
        for key in keys:
            common = shared_prefix(key, prompt)
            if common > most:
                best, most = key, common
        return best, most

    def get(self, key: Key) -> Any:
        """The saved state of ``key`` (KeyError if it is gone), now the most recently used."""
        with self._changed:
            self._states.move_to_end(key)
            return self._states[key]

    def put(self, key: Key, state: Any, whole: bool = False) -> None:
        """Save ``state`` (a byte buffer) under ``key``, dropping the oldest beyond
        :attr:`size` and :attr:`max_bytes`; a claim on ``key`` ends and the decoders waiting
        for it go on. ``whole``: a whole prompt (its long last turn included), of which one is
        kept, so that predictions with long inputs do not push out the prefixes many calls
        share."""
        with self._changed:
            if whole:
                if self._whole is not None and self._whole != key:
                    self._states.pop(self._whole, None)
                self._whole = key
            if len(state) <= self.max_bytes:
                self._states[key] = state
                self._states.move_to_end(key)
            while len(self._states) > self.size or self._bytes() > self.max_bytes:
                self._states.popitem(last=False)
            self._pending.discard(key)
            self._changed.notify_all()

    def _bytes(self) -> int:
        return sum(len(state) for state in self._states.values())

    def drop(self, key: Key) -> None:
        """Forget ``key`` (a state llama.cpp would not read back)."""
        with self._changed:
            self._states.pop(key, None)

    def claim_or_wait(
        self,
        key: Key,
        wait: bool = True,
        timeout: float = PENDING_WAIT_SECONDS,
        cancelled: threading.Event | None = None,
    ) -> str:
        """In one step, under the lock: :data:`SAVED` when ``key`` is saved; :data:`CLAIMED`
        when nobody is evaluating it (the caller now does, and ends the claim with :meth:`put`
        or :meth:`release`); else, with ``wait``, waits while another decoder evaluates it (at
        most ``timeout`` seconds, or until ``cancelled`` is set) and looks again; :data:`BUSY`
        when another decoder is still evaluating it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if key in self._states:
                    return SAVED
                if key not in self._pending:
                    self._pending.add(key)
                    return CLAIMED
                left = deadline - time.monotonic()
                if not wait or left <= 0 or (cancelled is not None and cancelled.is_set()):
                    return BUSY
                self._changed.wait(min(left, WAIT_SLICE_SECONDS))

    def release(self, key: Key) -> None:
        """End a claim without a state (the evaluation failed or was cut elsewhere): a decoder
        waiting for it claims it next."""
        with self._changed:
            self._pending.discard(key)
            self._changed.notify_all()
