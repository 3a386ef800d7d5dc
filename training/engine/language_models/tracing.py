"""LM call traces: what every LM and embedding call of a run was asked and answered.

Two contextvars, in the style of :func:`training.engine.language_models.usage.track`:

- :func:`trace_context` says *why* calls happen: the role (task ``prediction``, ``mutation``,
  ``crossover``, ``judge``, ``embedding``), the candidate being scored, the example, the split
  and phase. The trainer, the optimizers and the rewards set it; asyncio tasks inherit it.
- :func:`record` collects :class:`CallTrace` records while it is active (a script, or the
  dashboard's worker). Nothing is built when no recorder is active, so an unrecorded run pays
  one contextvar read per call.

Every record is bounded and scrubbed before anyone sees it: each text is cut to ``max_chars``
characters, a recorder keeps at most ``max_calls`` records (later ones are counted in
``dropped``), messages keep only their role and content, and anything that looks like a
secret (an API key, an ``Authorization``/``Bearer`` header, a ``key=...`` pair) is replaced by
``[redacted]`` (``redaction.redact``, the same rule LM error messages go through). The API
key and headers a provider request carries are never recorded at all.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from training.engine.language_models.redaction import REDACTED, redact  # noqa: F401  (re-exported)

#: Why a call was made.
ROLES = ("prediction", "mutation", "crossover", "judge", "embedding")
#: How many calls one recorder keeps (a dashboard run: ``TRAINBOARD_TRACE_MAX_CALLS``).
DEFAULT_MAX_CALLS = 2000
#: How many characters of each text (a message, a response, an error) a record keeps
#: (a dashboard run: ``TRAINBOARD_TRACE_MAX_CHARS``).
DEFAULT_MAX_CHARS = 4000
#: At most this many texts of one embedding request are kept.
MAX_EMBEDDING_TEXTS = 16
#: What replaces a secret.

_CONTEXT_FIELDS = ("role", "candidate_id", "example_index", "split", "phase", "epoch")
_CONTEXT_FIELD_SET = frozenset(_CONTEXT_FIELDS)


def clean_text(text: str, max_chars: int) -> str:
    """Redacted, then cut to ``max_chars`` characters (saying how many were left out)."""
    text = redact(text)
    if len(text) > max_chars:
        text = f"{text[:max_chars]}… [{len(text) - max_chars} more characters]"
    return text


@dataclass
class CallTrace:
    """One LM or embedding call (or a memoised prediction that avoided one).

    Args:
        seq: the order of the call in its recorder (1, 2, ...).
        role: why it was made (one of :data:`ROLES`).
        kind: ``completion``, ``embedding`` or ``memo`` (a memoised prediction: no call).
        model: the model string.
        candidate_id: the optimizer candidate whose variables were in use, when one was.
        example_index: the position of the example in its split, when the call served one.
        split: ``train``, ``validation`` or ``test`` (what ``example_index`` counts in).
        phase: a free label the caller sets (the dashboard: ``before``/``after``).
        epoch: the fit epoch (0-based), when inside ``fit``.
        messages: what was sent, ``[{"role", "content"}]`` (embedding: the texts).
        response: the raw text the provider returned.
        parsed: the validated output as JSON text (None when it did not parse); given to
            :func:`emit` as the output object, made text only when the record is kept.
        error: why the call or its parsing failed.
        failed: whether the call gave no usable output.
        latency: seconds spent in provider requests (all attempts).
        attempts: provider requests made (retries included; 0 for a cache or memo hit).
        prompt_tokens, completion_tokens, cost: as the provider reported them.
        cache_hit: the response cache answered.
        memo_hit: the trainer's prediction memo answered.
    """

    seq: int = 0
    role: str = "prediction"
    kind: str = "completion"
    model: str = ""
    candidate_id: str | None = None
    example_index: int | None = None
    split: str | None = None
    phase: str | None = None
    epoch: int | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    response: str | None = None
    parsed: str | None = None
    error: str | None = None
    failed: bool = False
    latency: float = 0.0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    cache_hit: bool = False
    memo_hit: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain dict (its own copy of the messages; texts are strings)."""
        values = {name: getattr(self, name) for name in _FIELD_ORDER}
        values["messages"] = [dict(message) for message in values["messages"] or []]
        return values


_FIELD_ORDER = tuple(CallTrace.__dataclass_fields__)


class TraceRecorder:
    """Collects the calls made while it is active (see :func:`record`).

    Args:
        max_calls: records kept at most; later calls are counted in ``dropped``.
        max_chars: characters kept of each text.
        on_record: called with each kept :class:`CallTrace` (e.g. to stream or store it).
        keep: whether ``records`` keeps them too (False when ``on_record`` stores them).
    """

    def __init__(
        self,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_chars: int = DEFAULT_MAX_CHARS,
        on_record: Callable[[CallTrace], Any] | None = None,
        keep: bool = True,
    ):
        if int(max_calls) < 0 or int(max_chars) < 1:
            raise ValueError("record(): max_calls must be >= 0 and max_chars >= 1")
        self.max_calls = int(max_calls)
        self.max_chars = int(max_chars)
        self.on_record = on_record
        self.keep = keep
        self.records: list[CallTrace] = []
        self.calls = 0
        self.dropped = 0
        self._lock = threading.Lock()

    def add(self, trace: CallTrace) -> None:
        """Keep a bounded, scrubbed copy of ``trace`` (or count it as dropped)."""
        self.add_values({name: getattr(trace, name) for name in CallTrace.__dataclass_fields__})

    def add_values(self, values: dict[str, Any]) -> None:
        """Keep a record made of ``values`` (:class:`CallTrace` fields; or count it dropped).

        The record is made cheaply here, on the caller's path: its texts (messages, response,
        parsed output, error) are kept as given and bounded and scrubbed when first read
        (:class:`_PendingTrace`), which is when ``records`` or an ``on_record`` consumer
        looks at them (the dashboard: when it writes a batch of rows, off the event loop)."""
        with self._lock:
            self.calls += 1
            if self.calls > self.max_calls:
                self.dropped += 1
                return
            seq = self.calls
        trace = _pending(values, self.max_chars, seq)
        if self.keep:
            self.records.append(trace)
        if self.on_record is not None:
            self.on_record(trace)


_RECORDERS: contextvars.ContextVar[tuple[TraceRecorder, ...]] = contextvars.ContextVar(
    "synalinks_trace_recorders", default=()
)
_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "synalinks_trace_context", default=None
)


@contextlib.contextmanager
def record(
    max_calls: int = DEFAULT_MAX_CALLS,
    max_chars: int = DEFAULT_MAX_CHARS,
    on_record: Callable[[CallTrace], Any] | None = None,
    keep: bool = True,
) -> Iterator[TraceRecorder]:
    """Record every LM and embedding call made inside the block.

    Args:
        max_calls: records kept at most (the rest are counted in ``recorder.dropped``).
        max_chars: characters kept of each message, response, parsed output and error.
        on_record: a callback given each record as it is made.
        keep: keep the records on the recorder (``recorder.records``).

    Returns:
        The :class:`TraceRecorder`.

    Example:

    ```python
    with synalinks.tracing.record(max_calls=500) as recorder:
        await program.fit(x=x_train, y=y_train, epochs=2)
    failed = [t for t in recorder.records if t.failed]
    ```
    """
    recorder = TraceRecorder(max_calls, max_chars, on_record, keep)
    token = _RECORDERS.set(_RECORDERS.get() + (recorder,))
    try:
        yield recorder
    finally:
        _RECORDERS.reset(token)


def attach(recorder: TraceRecorder) -> None:
    """Record this context's calls into ``recorder`` from now on, without a ``with`` block.

    For a callback, whose hooks are separate calls: ``on_train_begin`` attaches and
    ``on_train_end`` detaches (tasks started afterwards inherit the context)."""
    if not any(active is recorder for active in _RECORDERS.get()):
        _RECORDERS.set(_RECORDERS.get() + (recorder,))


def detach(recorder: TraceRecorder) -> None:
    """Stop recording into ``recorder`` in this context (see :func:`attach`)."""
    _RECORDERS.set(tuple(active for active in _RECORDERS.get() if active is not recorder))


class trace_context:  # noqa: N801 (used like the function-style context managers it sits by)
    """Say why the calls made inside the block happen (role, candidate, example, ...).

    Fields given as None are left as the outer context set them. A class rather than a
    generator-based context manager: the trainer enters one per traced prediction.

    Args:
        **fields: what the calls inside are for, as :class:`CallTrace` names it (``role``,
            ``epoch``, ``split``, ``candidate_id``, ``example_index``, ...); an unknown name
            is a TypeError.

    Example:

    ```python
    with trace_context(role="judge", example_index=3):
        await judge(y_true, y_pred)
    ```
    """

    __slots__ = ("fields", "token")

    def __init__(self, **fields: Any):
        unknown = fields.keys() - _CONTEXT_FIELD_SET
        if unknown:
            raise TypeError(
                f"trace_context(): unknown fields {sorted(unknown)}; use {_CONTEXT_FIELDS}"
            )
        role = fields.get("role")
        if role is not None and role not in ROLES:
            raise ValueError(f"trace_context(role={role!r}): expected one of {ROLES}")
        self.fields = fields
        self.token: contextvars.Token | None = None

    def __enter__(self) -> dict[str, Any]:
        merged = dict(_CONTEXT.get() or ())
        for name, value in self.fields.items():
            if value is not None:
                merged[name] = value
        self.token = _CONTEXT.set(merged)
        return merged

    def __exit__(self, *exc_info: Any) -> None:
        _CONTEXT.reset(self.token)


def enter_example(role: str | None, example_index: int | None) -> contextvars.Token:
    """What ``trace_context(role=role, example_index=example_index).__enter__()`` does, for
    the trainer's per-prediction path (no argument checks: ``role`` is a known role or
    None); undo it with :func:`exit_context`."""
    context = _CONTEXT.get()
    merged = dict(context) if context else {}
    if role is not None:
        merged["role"] = role
    if example_index is not None:
        merged["example_index"] = example_index
    return _CONTEXT.set(merged)


def exit_context(token: contextvars.Token) -> None:
    _CONTEXT.reset(token)


_BATCH_EXAMPLES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "synalinks_trace_batch_examples", default=None
)


@contextlib.contextmanager
def batch_examples(indices: list[int] | None) -> Iterator[None]:
    """Say which examples a batch being scored holds (their positions in the split), so a
    reward that scores it one example at a time (``Reward.score_batch``) can name each
    judgement's example (:func:`for_batch_item`)."""
    token = _BATCH_EXAMPLES.set(list(indices) if indices is not None else None)
    try:
        yield
    finally:
        _BATCH_EXAMPLES.reset(token)


def for_batch_item(position: int) -> trace_context:
    """The trace context of item ``position`` of the batch :func:`batch_examples` named
    (its ``example_index``); an empty context when none was named."""
    indices = _BATCH_EXAMPLES.get()
    if indices is None or not 0 <= position < len(indices):
        return trace_context()
    return trace_context(example_index=indices[position])


def current_role() -> str | None:
    """The role :func:`trace_context` set around this point, if any (no copy made)."""
    context = _CONTEXT.get()
    return context.get("role") if context else None


def current_context() -> dict[str, Any]:
    """The fields :func:`trace_context` set around this point (a copy)."""
    return dict(_CONTEXT.get() or {})


def active() -> bool:
    """Whether any recorder is listening (callers skip building records otherwise)."""
    return bool(_RECORDERS.get())


def emit(**values: Any) -> None:
    """Record one call into every active recorder, with the current context filled in.

    ``values`` are :class:`CallTrace` fields; the context's fields fill those not given (an
    embedding call is always role ``embedding``)."""
    emit_values(values)


def emit_values(values: dict[str, Any]) -> None:
    """:func:`emit` given the dict itself, which the record takes over (no copy: the LM's
    per-call path builds one dict and hands it here). The context is filled in when the
    record is first read, from the context current now (contexts are never changed in
    place: :class:`trace_context` makes a new one)."""
    recorders = _RECORDERS.get()
    if not recorders:
        return
    values["_context"] = _CONTEXT.get()
    if len(recorders) == 1:
        recorders[0].add_values(values)
        return
    for recorder in recorders:  # each its own copy
        recorder.add_values(dict(values))


_TEXT_FIELDS = ("messages", "response", "parsed", "error")
_LAZY_FIELDS = _TEXT_FIELDS + _CONTEXT_FIELDS
_FIELD_NAMES = frozenset(CallTrace.__dataclass_fields__) | {"_context"}


class _PendingTrace(CallTrace):
    """A :class:`CallTrace` finished when first read: the recording path stays cheap.

    Made by :meth:`TraceRecorder.add_values` without running ``CallTrace.__init__``: the
    caller's dict becomes the instance's (figures as given; a field not given reads its
    class default), the texts are the caller's own objects (the messages list, the
    response, the parsed output) and the context is the :func:`trace_context` current at
    the call. The first read of a text or context field (its property) finishes them all
    at once: context fields filled in, each text cleaned (``clean_text``: redaction, then
    the cut to ``max_chars``), the raw objects let go. Idempotent and safe from another
    thread (the dashboard reads records in its writer's).
    """

    def _finished(self) -> dict[str, Any]:
        state = self.__dict__
        if not state.get("_pending"):
            return state
        max_chars = state["_max_chars"]
        context = state.get("_context") or {}
        done: dict[str, Any] = {}
        for name in _CONTEXT_FIELDS:
            value = state.get(name)
            done[f"_{name}"] = context.get(name) if value is None else value
        if state.get("kind", "completion") == "embedding":
            done["_role"] = "embedding"
        elif done["_role"] is None:
            done["_role"] = "prediction"
        candidate_id, phase = done["_candidate_id"], done["_phase"]
        if candidate_id is not None:
            done["_candidate_id"] = str(candidate_id)[:64]
        if phase is not None:
            done["_phase"] = str(phase)[:40]
        done["_messages"] = _clean_messages(state.get("messages"), max_chars)
        for name in ("response", "parsed", "error"):
            text = state.get(name)
            done[f"_{name}"] = (
                None
                if text is None
                else clean_text(text if type(text) is str else _as_text(text), max_chars)
            )
        state.update(done)
        for name in _LAZY_FIELDS:
            state.pop(name, None)
        state["_context"] = None
        state["_pending"] = False
        return state


def _lazy_property(name: str) -> property:
    key = f"_{name}"

    def read(self: _PendingTrace) -> Any:
        return self._finished()[key]

    def write(self: _PendingTrace, value: Any) -> None:
        self._finished()[key] = value

    return property(read, write, doc=f"The record's {name} (finished when first read).")


for _name in _LAZY_FIELDS:
    setattr(_PendingTrace, _name, _lazy_property(_name))


def _pending(values: dict[str, Any], max_chars: int, seq: int) -> CallTrace:
    """One record of ``values`` (:class:`CallTrace` fields; the caller's own dict, which
    becomes the record's: nothing is copied or cleaned here, see :class:`_PendingTrace`)."""
    if not values.keys() <= _FIELD_NAMES:
        raise TypeError(f"CallTrace has no fields {sorted(values.keys() - _FIELD_NAMES)}")
    values["seq"] = seq
    values["_max_chars"] = max_chars
    values["_pending"] = True
    trace = _PendingTrace.__new__(_PendingTrace)
    trace.__dict__ = values
    return trace


def _clean_messages(messages: Any, max_chars: int) -> list[dict[str, str]]:
    """Each message as ``{"role", "content"}``, scrubbed and cut.

    A program sends the same system prompt and few-shot turns on every call (the same
    message objects: its prompt prefix is cached), so the cleaned prefix is kept, found by
    the system prompt's text and checked message by message (identity first, then
    equality); only the last message (the input) is cleaned each time."""
    if not messages:
        return []
    items = [m for m in messages if type(m) is dict]
    if not items:
        return []
    last = items.pop()
    if items:
        first = items[0].get("content")
        key = (first if type(first) is str else id(first), len(items), max_chars)
        entry = _PREFIXES.get(key)
        if entry is None or not _same_messages(entry[0], items):
            if len(_PREFIXES) >= _PREFIXES_KEPT:
                _PREFIXES.clear()
            entry = (
                tuple(items),
                tuple(_clean_message(m.get("role"), m.get("content"), max_chars) for m in items),
            )
            _PREFIXES[key] = entry
        cleaned = list(entry[1])
    else:
        cleaned = []
    cleaned.append(_clean_message(last.get("role"), last.get("content"), max_chars))
    return cleaned


#: Cleaned prompt prefixes: (system text, message count, max_chars) → (the source messages,
#: their cleaned copies). The records share the cleaned dicts: they are read-only.
_PREFIXES: dict[tuple, tuple[tuple[dict, ...], tuple[dict[str, str], ...]]] = {}
_PREFIXES_KEPT = 64


def _same_messages(kept: tuple[dict, ...], items: list[dict]) -> bool:
    for old, new in zip(kept, items, strict=True):
        if old is not new and old != new:
            return False
    return True


def _clean_message(role: Any, content: Any, max_chars: int) -> dict[str, str]:
    text = _as_text(content)
    return {"role": str(role or "")[:20], "content": clean_text(text, max_chars)}


def _clean_optional(text: Any, max_chars: int) -> str | None:
    return None if text is None else clean_text(_as_text(text), max_chars)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if hasattr(value, "model_dump_json"):  # a parsed output (pydantic), made text only if kept
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
