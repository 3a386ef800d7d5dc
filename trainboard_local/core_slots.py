"""At most one busy llama.cpp thread per CPU core on this machine, whatever the processes.

Each Celery worker process loads its own SmolLM2 instances (two processes × two one-thread
instances on a 2-core machine): one run alone keeps both cores busy, but two runs at once put
four compute-bound threads on two cores, and every call of both runs slows down while the
caches thrash. A decode therefore first takes one *core slot* per thread it runs: an exclusive
``flock`` on one of ``cores`` files in a shared temporary folder. The kernel drops the lock when
its holder exits, so a killed worker never leaks a slot. One run alone gets every slot; two
runs share them, call by call.

A call alone may also *borrow* the slots nobody holds for its prompt evaluation
(:meth:`CoreSlots.borrow`, used by ``decoding.py``): never waiting for one, and only as many as
the kernel says are idle right now (the slots only count Trainboard's llama.cpp threads; on a
shared machine another program's busy thread makes a second llama.cpp thread wait for it at
every synchronisation: the prompt ran at 0.5-0.8× its one-thread rate at load 3-8).

Example:
    ```python
    slots = CoreSlots(count=2)
    taken = slots.try_take()  # a slot number, or None when every core is busy
    try:
        ...  # decode on one thread
    finally:
        slots.give_back(taken)
    ```
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

#: The folder of the slot files; TRAINBOARD_LOCAL_LM_SLOTS_DIR overrides it (tests).
DEFAULT_DIRECTORY = Path(tempfile.gettempdir()) / "trainboard-local-lm-cores"
#: How long a waiting call sleeps between tries (seconds): a decode takes 0.1-2 s.
POLL_SECONDS = 0.01
#: The kernel's scheduler figures: its 4th field is "running/total" threads right now.
LOADAVG = Path("/proc/loadavg")


def running_elsewhere() -> int | None:
    """Threads running or ready to run now on this machine besides the calling one (the
    kernel's instantaneous count, not the load average), or None where it cannot be read."""
    try:
        running = LOADAVG.read_text().split()[3].split("/")[0]
        return max(0, int(running) - 1)
    except (OSError, IndexError, ValueError):
        return None


class CoreSlots:
    """``count`` machine-wide slots, one lock file each.

    Args:
        count: how many slots (the core count).
        directory: where the lock files live (shared by every process of the machine).
        running: how many threads besides the caller are running now (None: unknown);
            :func:`running_elsewhere` unless a test fixes it.
    """

    def __init__(
        self,
        count: int,
        directory: Path | None = None,
        running: Callable[[], int | None] = running_elsewhere,
    ):
        self.count = max(1, int(count))
        self.running = running
        self.directory = Path(
            directory or os.environ.get("TRAINBOARD_LOCAL_LM_SLOTS_DIR") or DEFAULT_DIRECTORY
        )
        self._files: dict[int, int] = {}  # slot -> open file descriptor (held)
        self._lock = threading.Lock()

    def try_take(self) -> int | None:
        """Lock a free slot and return its number, or None when all are taken."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            for slot in range(self.count):
                if slot in self._files:
                    continue
                descriptor = os.open(self.directory / f"core-{slot}.lock", os.O_RDWR | os.O_CREAT)
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(descriptor)
                    continue
                self._files[slot] = descriptor
                return slot
        return None

    def borrow(self, own_threads: int) -> list[int]:
        """The slots a call already holding ``own_threads`` can use too, now: each free (taken
        with :meth:`try_take`, never waited for) and, by the kernel's count, a core nobody
        else's thread is running on; at most ``count - own_threads``. Give each back with
        :meth:`give_back`.

        Example:
            ```python
            borrowed = slots.borrow(own_threads=1)  # [] when the machine is busy
            ```
        """
        others = self.running()
        room = self.count - own_threads - (others or 0)
        borrowed: list[int] = []
        while len(borrowed) < room:
            slot = self.try_take()
            if slot is None:
                break
            borrowed.append(slot)
        return borrowed

    def give_back(self, slot: int | None) -> None:
        """Unlock a slot taken by :meth:`try_take` (None is ignored)."""
        if slot is None:
            return
        with self._lock:
            descriptor = self._files.pop(slot, None)
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)

    def _take_all(self, count: int) -> list[int] | None:
        """``count`` slots at once, or none (never a part: two waiting processes each
        holding part of what they need would wait for each other)."""
        taken: list[int] = []
        while len(taken) < count:
            slot = self.try_take()
            if slot is None:
                for held in taken:
                    self.give_back(held)
                return None
            taken.append(slot)
        return taken

    async def take_async(self, count: int) -> list[int]:
        """``count`` slots, waiting (cancellably) until they are free."""
        import asyncio

        count = min(max(1, count), self.count)
        while True:
            taken = self._take_all(count)
            if taken is not None:
                return taken
            await asyncio.sleep(POLL_SECONDS)

    def take(self, count: int) -> list[int]:
        """``count`` slots, blocking until they are free."""
        import time

        count = min(max(1, count), self.count)
        while True:
            taken = self._take_all(count)
            if taken is not None:
                return taken
            time.sleep(POLL_SECONDS)

    def give_back_all(self, taken: list[int]) -> None:
        for slot in taken:
            self.give_back(slot)
