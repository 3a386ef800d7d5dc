"""Outbox: what a :class:`RemoteMonitor` sends to the dashboard, sent from a thread of its own.

The fit that produces the events must never wait for the dashboard nor fail because it is
away, so nothing here runs on the fit's path but :meth:`Outbox.put`, which appends to a
bounded buffer under a lock. A daemon thread creates the run (the first request), then posts
what waits in batches of at most :data:`MAX_BODY_BYTES`; a request that fails for a reason
that may pass (no connection, a timeout, a 5xx, a 429) is tried again after a pause that
doubles up to :data:`MAX_PAUSE` seconds; one the dashboard refuses (another 4xx) is dropped
with its reason logged. When the buffer is full, the oldest per-batch progress events go
first (the next one says the same, newer), then new items are dropped, counted and logged
once: the fit goes on either way.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

logger = logging.getLogger("training.engine.callbacks.remote_monitor")

#: Most bytes of JSON one request carries (the dashboard reads bodies up to 2 MiB).
MAX_BODY_BYTES = 1_500_000
#: Longest pause between two tries of a failed request, in seconds.
MAX_PAUSE = 30.0
#: HTTP statuses worth trying again: the dashboard is busy or restarting.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Seconds the thread lets items gather before a request (unless someone waits for them).
LINGER = 0.5
#: Seconds without an item, while a fit runs, after which an empty post says it is alive
#: (the dashboard fails a run from code that stays quiet for minutes).
KEEPALIVE = 60.0
#: Events a newer one of the same kind makes redundant: dropped first when the buffer fills.
DROPPABLE_FIRST = frozenset({"batch_end"})


def _payload(item: dict[str, Any]) -> Any:
    """What an item posts: an event as is, a trace as its record's fields (made here, on the
    thread: reading a record bounds and scrubs its texts)."""
    if item["kind"] == "trace":
        return item["trace"].to_dict()
    return item["event"]


class Refused(Exception):
    """The dashboard answered and refused the request: trying again would not help."""


class Outbox:
    """A bounded buffer of items and the thread that posts them (see the module docstring).

    Args:
        url: the dashboard's address (``https://trainboard.example``).
        token: a personal API token (``tb_…``), sent as ``Authorization: Bearer``.
        create: the body that creates the run (``POST /api/runs/from-code``).
        capacity: items kept at most while the dashboard is away.
        timeout: seconds one request may take, connection included.
        on_reply: called (on the thread) with each answer to a batch of events.
        extras: called (on the thread) for what goes with each batch (the usage so far).
    """

    def __init__(
        self,
        url: str,
        token: str,
        create: Callable[[], dict[str, Any]],
        capacity: int = 5000,
        timeout: float = 10.0,
        on_reply: Callable[[dict[str, Any]], None] | None = None,
        extras: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.create = create
        self.capacity = max(1, int(capacity))
        self.on_reply = on_reply
        self.extras = extras
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        self.items: collections.deque[dict[str, Any]] = collections.deque()
        self.dropped = 0
        self.run: dict[str, Any] | None = None  # the created run: {"id", "url", ...}
        self.reachable = True  # the last request was answered
        self.failed_for: str = ""  # why the dashboard is away, while it is
        self._in_flight = 0  # items taken by the thread and not yet answered
        self._lock = threading.Condition()
        self._closed = False
        self._refused = False
        self._flushing = 0  # callers in wait_sent: send at once
        self._idle = False  # the thread waits for items
        self.active = False  # a fit runs (its monitor says so): quiet spells get a keepalive
        self._warned_full = False
        self._thread = threading.Thread(target=self._loop, name="trainboard-outbox", daemon=True)
        self._thread.start()

    # -- the fit's side -------------------------------------------------------------------
    def put(self, item: dict[str, Any]) -> None:
        """Queue ``item`` (``{"kind": "event" | "trace", ...}``); never blocks, never raises."""
        with self._lock:
            if self._refused:  # the dashboard refused the run: nothing will be sent
                return
            if len(self.items) >= self.capacity and not self._make_room():
                self.dropped += 1
                if not self._warned_full:
                    self._warned_full = True
                    logger.warning(
                        "Trainboard: %d items wait for %s; newer ones are dropped until it "
                        "answers (the fit goes on)",
                        len(self.items),
                        self.url,
                    )
                return
            self.items.append(item)
            if self._idle:  # the thread waits for a first item (not while a batch gathers)
                self._lock.notify()

    def wait_sent(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for everything queued to be answered; True if it
        was. Returns at once while the dashboard is away (nothing would be sent)."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            self._flushing += 1
            self._lock.notify_all()
            try:
                while self.items or self._in_flight:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self.reachable:
                        return False
                    self._lock.wait(min(left, 0.5))
                return True
            finally:
                self._flushing -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    def _make_room(self) -> bool:
        """Drop the oldest droppable item not already taken by the request under way."""
        for position in range(self._in_flight, len(self.items)):
            item = self.items[position]
            if item.get("kind") == "event" and item.get("type") in DROPPABLE_FIRST:
                del self.items[position]
                self.dropped += 1
                return True
        return False

    # -- the thread -----------------------------------------------------------------------
    def _loop(self) -> None:
        pause = 1.0
        while True:
            with self._lock:
                quiet = False
                while not self.items and not self._closed and self.run is not None:
                    self._idle = True
                    quiet = not self._lock.wait(KEEPALIVE) and self.active
                    self._idle = False
                    if quiet:  # a long batch: say the fit is alive, so it is not failed
                        break
                if self._closed and (not self.items or not self.reachable):
                    return
            try:
                if self.run is None:
                    self.run = self._post("/api/runs/from-code", self.create())
                    logger.info("Trainboard: this fit is run %s", self.run.get("url"))
                else:
                    self._send_batch()
            except Refused as exc:
                if self.run is None:  # no run to send to: nothing will ever be sent
                    logger.warning("Trainboard refused the run: %s; the fit goes on", exc)
                    with self._lock:
                        self.items.clear()
                        self._refused = self._closed = True
                        self._lock.notify_all()
                    return
                logger.warning("Trainboard refused events of this fit: %s", exc)
            except Exception as exc:  # away, or anything else: the thread never dies of it
                self._away(str(exc) or type(exc).__name__)
                with self._lock:
                    self._lock.wait(pause)
                pause = min(MAX_PAUSE, pause * 2)
                continue
            pause = 1.0
            self._answered()

    def _send_batch(self) -> None:
        with self._lock:
            # let a batch gather: one request for what a fast fit makes in LINGER seconds
            deadline = time.monotonic() + LINGER
            while not self._closed and not self._flushing:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            batch, size = [], 2
            for item in self.items:
                text = item.get("_json")
                if text is None:  # encoded once, here, off the fit's path
                    text = item["_json"] = json.dumps(_payload(item), default=str)
                if batch and size + len(text) + 1 > MAX_BODY_BYTES:
                    break
                batch.append(item)
                size += len(text) + 1
            self._in_flight = len(batch)
        events = ",".join(item["_json"] for item in batch if item["kind"] == "event")
        traces = ",".join(item["_json"] for item in batch if item["kind"] == "trace")
        extras = json.dumps(self.extras() if self.extras is not None else {}, default=str)
        body = f'{{"events":[{events}],"traces":[{traces}]' + (
            f",{extras[1:]}" if extras != "{}" else "}"
        )
        try:
            reply = self._post_text(f"/api/runs/{int(self.run['id'])}/events", body)
        except Refused:
            self._done(len(batch))
            raise
        except BaseException:
            with self._lock:
                self._in_flight = 0
                self._lock.notify_all()
            raise
        self._done(len(batch))
        if self.on_reply is not None and isinstance(reply, dict):
            self.on_reply(reply)

    def _done(self, count: int) -> None:
        with self._lock:
            for _ in range(min(count, len(self.items))):
                self.items.popleft()
            self._in_flight = 0
            self._lock.notify_all()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post_text(path, json.dumps(body, default=str))

    def _post_text(self, path: str, body: str) -> dict[str, Any]:
        response = self.client.post(self.url + path, content=body)
        if response.status_code in RETRY_STATUSES or response.status_code >= 500:
            raise httpx.HTTPError(f"{path} answered {response.status_code}")
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise Refused(f"{response.status_code}: {str(detail)[:300]}")
        return response.json()

    def _away(self, reason: str) -> None:
        with self._lock:
            first = self.reachable
            self.reachable = False
            self.failed_for = reason
            self._lock.notify_all()
        if first:
            logger.warning(
                "Trainboard at %s is not answering (%s); the fit goes on, its events wait "
                "(up to %d) and are sent when it answers",
                self.url,
                reason[:200],
                self.capacity,
            )

    def _answered(self) -> None:
        with self._lock:
            back = not self.reachable
            self.reachable = True
            self.failed_for = ""
        if back:
            logger.warning("Trainboard at %s answers again; the waiting events follow", self.url)
