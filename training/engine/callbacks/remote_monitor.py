"""RemoteMonitor: a ``fit`` running in one's own code, streamed live into Trainboard as a run.

Keras's ``RemoteMonitor`` posts epoch logs to a server; this one posts everything the run
page shows: the program, the rows fit was given, every engine event (epochs, batches,
candidates with their per-example rewards, selections), the LM call traces and usage, the
evaluations made with it (before ``fit``: the run's "before"; after: its "after", per
example), and the trained program. The run appears in the dashboard's runs list marked "from
code" and its page works like any other; Cancel on that page stops the fit after its batch.

The fit never waits for the dashboard and never fails because of it: everything goes
through an :class:`~training.engine.callbacks.outbox.Outbox` (a bounded buffer and a thread
of its own, with retries). What is still queued when the Python process exits is sent
then, for at most ``wait_at_end`` seconds and only while the dashboard answers (a notebook's
kernel keeps sending meanwhile); ``await monitor.flush()`` waits for it earlier. A dashboard
that is away is logged once as a warning.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
from typing import Any

from training.engine.callbacks.callback import Callback
from training.engine.callbacks.outbox import Outbox
from training.engine.language_models import tracing, usage

#: Rows of the fit's (and each evaluation's) data sent at most; the rest are counted.
MAX_ROWS = 5000
#: Bytes of JSON the rows may take at most (one request carries them with the program).
MAX_ROWS_BYTES = 1_200_000
#: Bytes of JSON one evaluation may take (its rows and outputs; a request carries 1.5 MB).
MAX_EVENT_BYTES = 1_400_000
#: Characters kept of each traced text (the dashboard bounds them again).
TRACE_CHARS = 4000


class RemoteMonitor(Callback):
    """Streams a ``fit`` (and the ``evaluate`` calls it is given to) into Trainboard.

    Args:
        url: the dashboard's address; default ``$TRAINBOARD_URL``.
        token: a personal API token made in the dashboard's Settings; default
            ``$TRAINBOARD_TOKEN``.
        name: the run's name on the dashboard (default: the program's name).
        capacity: events and traces kept at most while the dashboard is away.
        timeout: seconds one request to the dashboard may take.
        wait_at_end: seconds the process's exit may wait for the events still queued to be
            delivered (only while the dashboard answers).
        traces: also send each LM call's trace (bounded, scrubbed as the engine records
            them).

    Example:

    ```python
    monitor = synalinks.callbacks.RemoteMonitor(
        url="http://127.0.0.1:8000", token="tb_…", name="support triage"
    )
    await program.evaluate(x_test, y_test, callbacks=[monitor])  # the run's "before"
    await program.fit(x_train, y_train, epochs=3, callbacks=[monitor])
    await program.evaluate(x_test, y_test, callbacks=[monitor])  # its "after"
    print(monitor.run_url)
    ```
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        name: str = "",
        capacity: int = 5000,
        timeout: float = 10.0,
        wait_at_end: float = 10.0,
        traces: bool = True,
    ) -> None:
        super().__init__()
        self.url = url or os.environ.get("TRAINBOARD_URL", "")
        self.token = token or os.environ.get("TRAINBOARD_TOKEN", "")
        if not self.url or not self.token:
            raise ValueError(
                "RemoteMonitor needs the dashboard's address and a personal token: pass "
                "url= and token=, or set TRAINBOARD_URL and TRAINBOARD_TOKEN"
            )
        self.name = str(name)[:200]
        self.capacity = int(capacity)
        self.timeout = float(timeout)
        self.wait_at_end = float(wait_at_end)
        self.send_traces = bool(traces)
        self.outbox: Outbox | None = None
        self.trained = False  # train_end seen: later evaluations are the run's "after"
        self._rows: tuple[list, list] = ([], [])
        self._usage = usage.Usage()
        self._recorder = tracing.TraceRecorder(
            max_calls=10**9, max_chars=TRACE_CHARS, on_record=self._trace, keep=False
        )
        self._waiting: list[dict[str, Any]] = []  # an evaluation made before the run exists
        self._evaluation: dict[str, Any] | None = None
        self._evaluations = {"before": 0, "after": 0}
        self._test_rows_sent = False
        self._drain_registered = False
        self._outboxes: list[Outbox] = []  # one per fit: each is drained at exit

    @property
    def run_url(self) -> str | None:
        """The run's page on the dashboard, once it answered."""
        run = self.outbox.run if self.outbox is not None else None
        return run.get("url") if run else None

    @property
    def dropped(self) -> int:
        """Events and traces dropped because the buffer was full while the dashboard was away."""
        return self.outbox.dropped if self.outbox is not None else 0

    def set_rows(self, x: list, y: list) -> None:
        self._rows = (list(x), list(y))

    # -- fit ------------------------------------------------------------------------------
    async def on_train_begin(self, logs=None):
        if self.trained and self.outbox is not None:
            # a second fit with the same monitor is a run of its own: the first one's
            # outbox sends what it still holds and ends
            self.outbox.close()
            self.outbox = None
            self._evaluations = {"before": 0, "after": 0}
            self._test_rows_sent = False
            self._usage = usage.Usage()
        self.trained = False
        self._listen()
        rows, total = _rows_json(*self._rows)
        program = self.program
        create = {
            "name": self.name or getattr(program, "name", "") or "",
            "program": program.get_config(),
            "rows": rows,
            "rows_total": total,
            "params": _plain(getattr(self, "params", {}) or {}),
            "optimizer": _described(getattr(program, "optimizer", None)),
            "reward": _described(getattr(program, "reward", None)),
        }
        if self.outbox is None:
            if not self._drain_registered:
                atexit.register(self._drain)
                self._drain_registered = True
            self.outbox = Outbox(
                self.url,
                self.token,
                create=lambda: create,
                capacity=self.capacity,
                timeout=self.timeout,
                on_reply=self._reply,
                extras=lambda fit_usage=self._usage: {"usage": fit_usage.to_dict()},
            )
            self._outboxes.append(self.outbox)
        self.outbox.active = True
        for item in self._waiting:
            self.outbox.put(item)
        self._waiting = []

    async def on_event(self, event: dict[str, Any]):
        if self.outbox is None:
            return
        event = dict(event)
        if event.get("type") == "train_end":
            optimizer = getattr(self.program, "optimizer", None)
            event["program"] = self.program.get_config()
            event["kept_seed"] = bool(getattr(optimizer, "kept_seed", True))
            self.outbox.active = False
        self._put_event(event)

    async def on_train_end(self, logs=None):
        self.trained = True
        self._quiet()

    # -- evaluate -------------------------------------------------------------------------
    async def on_test_begin(self, logs=None):
        self._listen()
        self._evaluation = {"rewards": [], "predictions": [], "errors": []}

    async def on_test_batch_end(self, batch, logs=None):
        if self._evaluation is None:
            return
        logs = logs or {}
        rewards = [float(value) for value in logs.get("example_rewards", [])]
        outputs = list(logs.get("example_predictions") or [None] * len(rewards))
        errors = list(logs.get("example_errors") or [None] * len(rewards))
        self._evaluation["rewards"].extend(rewards)
        for output, error in zip(outputs, errors, strict=False):
            self._evaluation["predictions"].append(_json_of(output))
            self._evaluation["errors"].append(None if output is not None else error)

    async def on_test_end(self, logs=None):
        self._quiet()
        collected, self._evaluation = self._evaluation, None
        if collected is None:
            return
        phase = "after" if self.trained else "before"
        event = {
            "type": "evaluation",
            "phase": phase,
            "index": self._evaluations[phase],
            "logs": {k: v for k, v in (logs or {}).items() if isinstance(v, int | float)},
            "example_rewards": collected["rewards"],
            "predictions": collected["predictions"],
            "errors": collected["errors"],
        }
        self._evaluations[phase] += 1
        if not self._test_rows_sent:
            event["rows"], event["rows_total"] = _rows_json(*self._rows)
            self._test_rows_sent = True
        if len(json.dumps(event, default=str)) > MAX_EVENT_BYTES:
            # one request must carry it: the outputs go, each example's reward stays
            event["predictions"], event["errors"] = [], []
        if self.outbox is None:
            self._waiting.append(_event_item(event))
        else:
            self._put_event(event)

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait (off the event loop) until what is queued reached the dashboard, at most
        ``timeout`` seconds (default ``wait_at_end``); True if it did. Returns at once while
        the dashboard is away."""
        if self.outbox is None:
            return True
        wait = self.wait_at_end if timeout is None else float(timeout)
        return await asyncio.to_thread(self.outbox.wait_sent, wait)

    # -- helpers --------------------------------------------------------------------------
    def _drain(self) -> None:
        """At the process's exit: what is still queued, sent within ``wait_at_end`` seconds."""
        for outbox in self._outboxes:
            outbox.wait_sent(self.wait_at_end)
            outbox.close()

    def _listen(self) -> None:
        usage.attach(self._usage)
        if self.send_traces:
            tracing.attach(self._recorder)

    def _quiet(self) -> None:
        usage.detach(self._usage)
        tracing.detach(self._recorder)

    def _put_event(self, event: dict[str, Any]) -> None:
        self.outbox.put(_event_item(event))

    def _trace(self, trace: tracing.CallTrace) -> None:
        item = {"kind": "trace", "trace": trace}  # made a dict on the outbox's thread
        if self.outbox is not None:
            self.outbox.put(item)
        elif len(self._waiting) < self.capacity:  # an evaluation before the run exists
            self._waiting.append(item)

    def _reply(self, reply: dict[str, Any]) -> None:
        """The dashboard's answer to a batch: Cancel pressed on the run page stops the fit
        after its batch, as it does a run the dashboard executes."""
        if reply.get("stop") and self.program is not None:
            self.program.stop_training = True


def _event_item(event: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "event", "type": event.get("type"), "event": event}


def _json_of(value: Any) -> Any:
    if value is None:
        return None
    if hasattr(value, "get_json"):
        return value.get_json()
    if isinstance(value, list | tuple):
        merged: dict[str, Any] = {}
        for part in value:
            merged.update(_json_of(part) or {})
        return merged
    return value if isinstance(value, dict) else {"value": value}


def _rows_json(x: list, y: list) -> tuple[list[dict[str, Any]], int]:
    """The rows as ``{"inputs": {...}, "targets": {...}}``, as many as the bounds allow."""
    rows: list[dict[str, Any]] = []
    size = 0
    for inputs, targets in zip(x[:MAX_ROWS], y[:MAX_ROWS], strict=False):
        row = {"inputs": _json_of(inputs) or {}, "targets": _json_of(targets) or {}}
        size += len(json.dumps(row, default=str)) + 1  # as the request carries it
        if size > MAX_ROWS_BYTES:
            break
        rows.append(row)
    return rows, len(x)


def _described(thing: Any) -> dict[str, Any]:
    if thing is None:
        return {}
    config = thing.get_config() if hasattr(thing, "get_config") else {}
    return {"name": type(thing).__name__, "params": _plain(config)}


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON (what is not JSON becomes its text)."""
    if depth > 8:
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
