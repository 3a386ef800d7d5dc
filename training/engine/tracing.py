"""LM call traces: what every LM and embedding call of a run was asked and answered.

Two contextvars, in the style of :func:`training.engine.usage.track`:

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
``[REDACTED]``. The API key and headers a provider request carries are never recorded at all.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

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
REDACTED = "[REDACTED]"

_CONTEXT_FIELDS = ("role", "candidate_id", "example_index", "split", "phase", "epoch")

_SECRET_PATTERNS = (
    # Authorization: Bearer <token> / Basic <token>
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    # key=value, "api_key": "value", Authorization: value, x-api-key: value ...
    re.compile(
        r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret|password)"
        r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}]{6,}"
    ),
    # Well-known key shapes: OpenAI/Anthropic (sk-...), Google (AIza...), AWS, GitHub, HF.
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
)


# Words one of the patterns needs (lower case): a text holding none of them (most texts) is
# returned as it is after one scan, without running the patterns.
_SECRET_HINT = re.compile(
    r"bearer|basic|key|authoriz|token|secret|password|k-|aiza|akia|hf_|gh[pousr]_"
)


def redact(text: str) -> str:
    """``text`` with everything that looks like a secret replaced by ``[REDACTED]``."""
    if not text:
        return text
    if not _SECRET_HINT.search(text.lower()):
        return text
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    for pattern in _SECRET_PATTERNS[2:]:
        text = pattern.sub(REDACTED, text)
    return text


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
        return asdict(self)


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
        self.add_values(dict(trace.__dict__))

    def add_values(self, values: dict[str, Any]) -> None:
        """Keep a bounded, scrubbed record made of ``values`` (:class:`CallTrace` fields)."""
        with self._lock:
            self.calls += 1
            if self.calls > self.max_calls:
                self.dropped += 1
                return
            seq = self.calls
        trace = _bounded(values, self.max_chars, seq)
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


@contextlib.contextmanager
def trace_context(**fields: Any) -> Iterator[dict[str, Any]]:
    """Say why the calls made inside the block happen (role, candidate, example, ...).

    Fields given as None are left as the outer context set them.

    Example:

    ```python
    with trace_context(role="judge", example_index=3):
        await judge(y_true, y_pred)
    ```
    """
    unknown = set(fields) - set(_CONTEXT_FIELDS)
    if unknown:
        raise TypeError(f"trace_context(): unknown fields {sorted(unknown)}; use {_CONTEXT_FIELDS}")
    if "role" in fields and fields["role"] is not None and fields["role"] not in ROLES:
        raise ValueError(f"trace_context(role={fields['role']!r}): expected one of {ROLES}")
    merged = {**(_CONTEXT.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _CONTEXT.set(merged)
    try:
        yield merged
    finally:
        _CONTEXT.reset(token)


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
    recorders = _RECORDERS.get()
    if not recorders:
        return
    context = _CONTEXT.get()
    if context:
        for name, value in context.items():
            if values.get(name) is None:
                values[name] = value
    if values.get("kind") == "embedding":
        values["role"] = "embedding"
    elif values.get("role") is None:
        values["role"] = "prediction"
    if len(recorders) == 1:
        recorders[0].add_values(values)
        return
    for recorder in recorders:  # each fills in its own copy
        recorder.add_values(dict(values))


def _bounded(values: dict[str, Any], max_chars: int, seq: int) -> CallTrace:
    """One record holding only roles and contents of messages, every text scrubbed and cut
    (``values`` is the caller's own dict: it is filled in, not copied)."""
    values["seq"] = seq
    values["messages"] = _clean_messages(values.get("messages"), max_chars)
    for name in ("response", "parsed", "error"):  # "parsed" may be the output: made JSON here
        text = values.get(name)
        if text is not None:
            values[name] = clean_text(text if type(text) is str else _as_text(text), max_chars)
    candidate_id, phase = values.get("candidate_id"), values.get("phase")
    if candidate_id is not None:
        values["candidate_id"] = str(candidate_id)[:64]
    if phase is not None:
        values["phase"] = str(phase)[:40]
    return CallTrace(**values)


def _clean_messages(messages: Any, max_chars: int) -> list[dict[str, str]]:
    """Each message as ``{"role", "content"}``, scrubbed and cut. All but the last are
    looked up as one (a program's system prompt and few-shot turns are the same on every
    call: scrubbed once); the last (the input) is cleaned on its own."""
    if not messages:
        return []
    items = [m for m in messages if type(m) is dict]
    if not items:
        return []
    last = items.pop()
    key = tuple([(m.get("role"), m.get("content")) for m in items])
    try:
        cleaned = list(_clean_prefix(key, max_chars))
    except TypeError:  # a content that is not hashable (a list of parts): no cache
        cleaned = list(_clean_prefix.__wrapped__(key, max_chars))
    cleaned.append(_clean_message(last.get("role"), last.get("content"), max_chars))
    return cleaned


@functools.lru_cache(maxsize=64)
def _clean_prefix(key: tuple, max_chars: int) -> tuple[dict[str, str], ...]:
    # The records share these dicts: they are read-only.
    return tuple(_clean_message(role, content, max_chars) for role, content in key)


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
