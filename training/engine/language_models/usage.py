"""LM usage accounting: one record per call, totalled by ``usage.track()``.

``track()`` pushes a tracker on a contextvar; every LM/embedding call records into all trackers
active in its context (asyncio tasks inherit the context), so nested tracks each see their share.

Each record also carries the *role* of the call (why it was made: a task ``prediction``, an
optimizer ``mutation``/``crossover``, a ``judge``, an ``embedding``), taken from
``tracing.trace_context`` when the record is made, so ``Usage.by_role`` splits the spend by
role whether or not call traces are being recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from training.engine.language_models import tracing

#: The counters kept per role in ``Usage.by_role``.
ROLE_COUNTERS = (
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "latency",
    "failures",
    "cache_hits",
    "memo_hits",
)


@dataclass
class UsageRecord:
    """One LM or embedding call (or a cache/memo hit that avoided one)."""

    model: str
    #: completion | embedding | parse (an unusable output) | judge (a failed judgement)
    kind: str = "completion"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    latency: float = 0.0
    failed: bool = False
    cache_hit: bool = False
    memo_hit: bool = False
    error: str | None = None
    #: Why the call was made (``tracing.ROLES``); filled in by :func:`record` from the
    #: current ``trace_context`` when not given.
    role: str | None = None


@dataclass
class Usage:
    """Totals over many records. ``calls`` counts real (paid) requests only; ``failures`` counts
    failed requests plus outputs that did not parse (``parse_failures``). ``judge_failures``
    counts judgements (LMAsJudge / ProgramAsJudge rewards) that produced no usable score and
    were scored 0.0: the judge's own LM calls and failures are already in the other counters;
    this says how many rewards of the run are judge failures rather than real zeros."""

    calls: int = 0
    embedding_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cost_known: bool = True
    latency: float = 0.0
    failures: int = 0
    parse_failures: int = 0
    cache_hits: int = 0
    memo_hits: int = 0
    judge_failures: int = 0
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {role: {calls, prompt_tokens, completion_tokens, cost, latency, failures, cache_hits,
    #: memo_hits}}: where the spend goes (``calls`` counts LM and embedding requests alike).
    by_role: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def _role(self, record: UsageRecord) -> dict[str, Any]:
        role = record.role or ("embedding" if record.kind == "embedding" else "prediction")
        entry = self.by_role.get(role)
        if entry is None:
            entry = self.by_role[role] = dict.fromkeys(ROLE_COUNTERS, 0)
            entry["cost"] = entry["latency"] = 0.0
        return entry

    def add(self, record: UsageRecord) -> None:
        with self._lock:
            role = self._role(record)
            if record.memo_hit:
                self.memo_hits += 1
                role["memo_hits"] += 1
                return
            if record.cache_hit:
                self.cache_hits += 1
                role["cache_hits"] += 1
                return
            if record.kind == "judge":
                self.judge_failures += 1
                return
            if record.kind == "parse":  # the call was counted already; its output was unusable
                self.failures += 1
                self.parse_failures += 1
                role["failures"] += 1
                return
            if record.kind == "embedding":
                self.embedding_calls += 1
            else:
                self.calls += 1
            if record.failed:
                self.failures += 1
                role["failures"] += 1
            role["calls"] += 1
            self.prompt_tokens += record.prompt_tokens
            self.completion_tokens += record.completion_tokens
            self.latency += record.latency
            role["prompt_tokens"] += record.prompt_tokens
            role["completion_tokens"] += record.completion_tokens
            role["latency"] += record.latency
            if record.cost is None:
                if not record.failed:
                    self.cost_known = False
            else:
                self.cost += record.cost
                role["cost"] += record.cost
            per = self.by_model.setdefault(
                record.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}
            )
            per["calls"] += 1
            per["prompt_tokens"] += record.prompt_tokens
            per["completion_tokens"] += record.completion_tokens
            per["cost"] += record.cost or 0.0

    def to_dict(self) -> dict[str, Any]:
        """A copy of the totals (taken under the lock: another thread may read them while
        calls add to them, as a monitor posting a fit's usage does)."""
        with self._lock:
            data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}
            data["by_model"] = {model: dict(values) for model, values in self.by_model.items()}
            data["by_role"] = {role: dict(values) for role, values in self.by_role.items()}
            data["total_tokens"] = self.total_tokens
            data["cost"] = self.cost if self.cost_known else (self.cost or None)
        return data


_ACTIVE: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar(
    "synalinks_usage_trackers", default=()
)
GLOBAL_USAGE = Usage()


def record(entry: UsageRecord) -> None:
    """Add a record to the process total and to every tracker active in this context.

    A record without a role gets the one ``tracing.trace_context`` set around the call
    (an embedding is always ``embedding``; no context means a task ``prediction``)."""
    if entry.role is None:
        entry.role = (
            "embedding" if entry.kind == "embedding" else tracing.current_role() or "prediction"
        )
    GLOBAL_USAGE.add(entry)
    for tracker in _ACTIVE.get():
        tracker.add(entry)


@contextlib.contextmanager
def track() -> Iterator[Usage]:
    """``with synalinks.usage.track() as usage: await program.fit(...)`` → ``usage.calls`` ..."""
    tracker = Usage()
    token = _ACTIVE.set(_ACTIVE.get() + (tracker,))
    try:
        yield tracker
    finally:
        _ACTIVE.reset(token)


def attach(tracker: Usage) -> None:
    """Count this context's calls into ``tracker`` from now on, without a ``with`` block.

    For a callback, whose hooks are separate calls: ``on_train_begin`` attaches and
    ``on_train_end`` detaches. The calls of tasks started afterwards count too (they
    inherit the context); a block that set the trackers before restores its own on exit."""
    if not any(active is tracker for active in _ACTIVE.get()):
        _ACTIVE.set(_ACTIVE.get() + (tracker,))


def detach(tracker: Usage) -> None:
    """Stop counting into ``tracker`` in this context (see :func:`attach`)."""
    _ACTIVE.set(tuple(active for active in _ACTIVE.get() if active is not tracker))
