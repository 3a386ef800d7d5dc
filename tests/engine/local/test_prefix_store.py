"""The pool's store of saved prompt prefixes (``trainboard_local/prefix_store.py``): one
claim per prefix, waiters woken by the save or by the claim ending without one, bounded waits,
the most recently used kept."""

import threading
import time

from trainboard_local.prefix_store import BUSY, CLAIMED, SAVED, PrefixStore


class NotedWaits(threading.Condition):
    """A store's condition that notes when a claim starts waiting on it (``waiting``)."""

    def __init__(self):
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout=None):
        self.waiting.set()  # under the lock: whoever takes it next finds the claim waiting
        return super().wait(timeout)


def noting_waits(store: PrefixStore) -> NotedWaits:
    store._changed = NotedWaits()
    return store._changed


def once_waiting(changed: NotedWaits, action, *args) -> threading.Thread:
    """``action(*args)`` on a thread of its own, once a claim waits on ``changed``."""

    def run():
        assert changed.waiting.wait(10), "no claim waited"
        action(*args)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_prefix_is_claimed_once_and_a_waiter_gets_it_when_it_is_saved():
    store = PrefixStore()
    changed = noting_waits(store)
    key = (1, 2, 3)
    assert store.claim_or_wait(key) == CLAIMED
    assert store.claim_or_wait(key, wait=False) == BUSY  # another decoder is evaluating it
    got = {}

    def waiter() -> None:
        got["found"] = store.claim_or_wait(key, timeout=10)

    thread = threading.Thread(target=waiter)
    thread.start()
    assert changed.waiting.wait(10)
    assert thread.is_alive()  # still waiting
    store.put(key, b"state")
    thread.join(5)
    assert got == {"found": SAVED}
    assert store.get(key) == b"state"


def test_a_claim_that_ends_without_a_state_passes_to_the_waiter():
    store = PrefixStore()
    key = (7, 8)
    store.claim_or_wait(key)
    releaser = once_waiting(noting_waits(store), store.release, key)
    assert store.claim_or_wait(key, timeout=10) == CLAIMED  # the waiter evaluates it now
    releaser.join()


def test_a_wait_is_bounded_and_stops_when_the_call_is_cancelled():
    store = PrefixStore()
    key = (4, 5)
    store.claim_or_wait(key)
    started = time.monotonic()
    assert store.claim_or_wait(key, timeout=0.3) == BUSY
    assert 0.25 <= time.monotonic() - started < 2
    cancelled = threading.Event()
    canceller = once_waiting(noting_waits(store), cancelled.set)
    started = time.monotonic()
    assert store.claim_or_wait(key, timeout=30, cancelled=cancelled) == BUSY
    assert time.monotonic() - started < 2
    canceller.join()


def test_the_saved_prefix_sharing_most_is_found_and_the_least_recently_used_dropped():
    store = PrefixStore(size=2)
    store.put((1, 2), b"a")
    store.put((1, 2, 3, 4), b"b")
    assert store.nearest([1, 2, 3, 4, 5]) == ((1, 2, 3, 4), 4)
    assert store.nearest([1, 2, 3, 9]) == ((1, 2, 3, 4), 3)  # shares its first three tokens
    assert store.nearest([9]) == (None, 0)
    store.get((1, 2))  # used: now the most recent
    store.put((5, 6), b"c")
    assert store.keys() == [(1, 2), (5, 6)]
    store.drop((1, 2))
    assert (1, 2) not in store and len(store) == 1


def test_saved_states_are_kept_within_their_byte_budget():
    store = PrefixStore(size=6, max_bytes=10)
    store.put((1,), bytes(4))
    store.put((2,), bytes(4))
    store.put((3,), bytes(4))  # 12 bytes: the oldest goes
    assert store.keys() == [(2,), (3,)]
    store.put((4,), bytes(11))  # larger than the whole budget: not kept, nothing else lost
    assert store.keys() == [(2,), (3,)]


def test_one_whole_prompt_is_kept_and_a_tie_goes_to_the_shorter_prefix():
    store = PrefixStore()
    store.put((1, 2), b"cut")
    store.put((1, 2, 3, 4), b"whole", whole=True)
    store.put((1, 2, 5, 6), b"next whole", whole=True)  # replaces the first
    assert store.keys() == [(1, 2), (1, 2, 5, 6)]
    assert store.nearest([1, 2, 9]) == ((1, 2), 2)  # both share two tokens: the shorter
