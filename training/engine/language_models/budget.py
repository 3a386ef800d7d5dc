"""CallBudget: caps on LM calls, tokens, cost and time that no call can pass.

A cap checked after a batch is a cap passed by a batch: eight concurrent predictions, their
retries and the optimizer's calls all start before anyone looks. So the budget is asked before
every *attempt* of every LM and embedding request (:func:`reserve`, called by
:func:`training.engine.language_models.retry.call_with_retries` once it holds the model's
slot): the attempt reserves one call and a bound on its tokens (the prompt's UTF-8 bytes, a
byte-level tokenizer never makes more tokens than that, plus ``max_tokens``) and cost; when
that would pass a cap, the attempt never starts and :class:`BudgetExhausted` is raised. After
the attempt the reservation is settled with what was really used (a failed attempt: one call,
no tokens), so the unused part goes back. Reserving is one synchronous step under a lock, so
concurrent calls (tasks of one loop, or threads) can never jointly pass a cap.

The time cap is a deadline: no attempt starts after it, and an attempt in flight at the
deadline is cancelled (its reservation counts as a call).

``fit``, ``evaluate`` and ``predict`` treat :class:`BudgetExhausted` as a clean stop, like
``program.interrupt()``: ``fit`` keeps the best candidates so far and ends with ``stopped``
True, ``program.budget_exhausted`` holds the error. It is a ``BaseException`` (as the trainer's
``Interrupted``), so code that survives ordinary failures (an optimizer's ``except Exception``
around a step) does not swallow it.

Example:

```python
budget = synalinks.CallBudget(calls=40, tokens=50_000)
with budget.applied():
    history = await program.fit(x=x_train, y=y_train, epochs=2)
print(budget.used_calls, program.budget_exhausted)  # <= 40, "calls" when the cap stopped it
```
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: Tokens a reservation allows for a completion when the model sets no ``max_tokens``.
DEFAULT_COMPLETION_TOKENS = 1024
#: Tokens a reservation adds per message (role markers, separators of a chat template).
TOKENS_PER_MESSAGE = 8
#: The caps, in the order they are checked (also :attr:`BudgetExhausted.cap`'s values).
CAPS = ("calls", "tokens", "cost", "seconds")


class BudgetExhausted(BaseException):  # noqa: N818 — named for what happened, like Interrupted
    """An LM call was refused: it could pass a cap of the active :class:`CallBudget`.

    Args:
        cap: which cap (``"calls"``, ``"tokens"``, ``"cost"`` or ``"seconds"``).
        used: what the budget had used of it when the call was refused.
        limit: the cap.

    The three are kept as attributes of the same names, for the message a run shows.
    """

    def __init__(self, cap: str, used: float, limit: float):
        self.cap, self.used, self.limit = cap, used, limit
        super().__init__(f"budget reached: {cap} {used:g} used of {limit:g}; the call was refused")


@dataclass
class Reservation:
    """What one attempt holds of each active budget until it is settled."""

    budgets: tuple[CallBudget, ...]
    calls: int
    tokens: int
    cost: float
    settled: bool = False

    def settle(self, tokens: int = 0, cost: float | None = 0.0) -> None:
        """Replace the reservation by what the attempt used (failed: no tokens, no cost)."""
        if self.settled:
            return
        self.settled = True
        for budget in self.budgets:
            budget._settle(self, int(tokens or 0), float(cost or 0.0))

    def remaining_seconds(self) -> float | None:
        """Seconds until the first deadline of the budgets (None: no time cap)."""
        left = [b.remaining_seconds() for b in self.budgets if b.seconds is not None]
        return min(left) if left else None

    def expired(self) -> BudgetExhausted | None:
        """The error of a budget whose time ran out (the attempt in flight is then cut)."""
        for budget in self.budgets:
            if budget.seconds is not None and budget.remaining_seconds() <= 0:
                return budget._refuse("seconds")
        return None


class CallBudget:
    """Caps on the LM calls made while it is applied (each optional; None: no cap).

    Args:
        calls: LM completion requests (each attempt counts; cache and memo hits are free;
            embedding requests count in tokens and cost only, as in ``usage.calls``).
        tokens: prompt plus completion tokens, of completions and embeddings.
        cost: dollars (a call whose price is unknown cannot be bounded: it is let through).
        seconds: time from when the budget is made (or ``started``) to its deadline.
        started: the ``time.monotonic()`` the time cap counts from (default: now).

    Example:
        >>> with CallBudget(calls=10).applied():
        ...     await program.evaluate(x, y)   # at most 10 LM calls, then a clean stop
    """

    def __init__(
        self,
        calls: int | None = None,
        tokens: int | None = None,
        cost: float | None = None,
        seconds: float | None = None,
        started: float | None = None,
    ):
        self.calls, self.tokens, self.cost, self.seconds = calls, tokens, cost, seconds
        self.started = time.monotonic() if started is None else float(started)
        self.used_calls = 0
        self.used_tokens = 0
        self.used_cost = 0.0
        self._reserved = {"calls": 0, "tokens": 0, "cost": 0.0}
        self._held = {"calls": 0, "tokens": 0, "cost": 0.0}
        #: The first cap that refused a call (None while none did).
        self.exhausted: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        caps = ", ".join(f"{cap}={getattr(self, cap)!r}" for cap in CAPS if getattr(self, cap))
        return f"CallBudget({caps})"

    # -- reading -------------------------------------------------------------------------
    def remaining_seconds(self) -> float | None:
        if self.seconds is None:
            return None
        return self.seconds - (time.monotonic() - self.started)

    def used(self) -> dict[str, float]:
        """What was used (settled) of each cap."""
        return {
            "calls": self.used_calls,
            "tokens": self.used_tokens,
            "cost": self.used_cost,
            "seconds": time.monotonic() - self.started,
        }

    def left(self, cap: str) -> float | None:
        """What is left of ``cap`` for new calls (reservations and holds taken off)."""
        limit = getattr(self, cap)
        if limit is None:
            return None
        if cap == "seconds":
            return self.remaining_seconds()
        used = {"calls": self.used_calls, "tokens": self.used_tokens, "cost": self.used_cost}[cap]
        return limit - used - self._reserved[cap] - self._held[cap]

    # -- holding back ----------------------------------------------------------------------
    @contextlib.contextmanager
    def holding(self, calls: int = 0, tokens: int = 0, cost: float = 0.0) -> Iterator[CallBudget]:
        """Keep an amount out of reach while the block runs, for what comes after it (the
        test evaluation after ``fit``): calls inside the block stop that much earlier."""
        with self._lock:
            held = dict(self._held)
            self._held = {
                "calls": held["calls"] + int(calls),
                "tokens": held["tokens"] + int(tokens),
                "cost": held["cost"] + float(cost),
            }
        try:
            yield self
        finally:
            with self._lock:
                self._held = held

    # -- applying --------------------------------------------------------------------------
    @contextlib.contextmanager
    def applied(self) -> Iterator[CallBudget]:
        """Every LM and embedding call in this context (asyncio tasks inherit it) asks this
        budget first; budgets nest (a call must fit in each)."""
        token = _ACTIVE.set(_ACTIVE.get() + (self,))
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    # -- reserving -----------------------------------------------------------------------
    def _refuse(self, cap: str) -> BudgetExhausted:
        if self.exhausted is None:
            self.exhausted = cap
        used = self.used()[cap]
        return BudgetExhausted(cap, used, getattr(self, cap))

    def _problem(self, calls: int, tokens: int, cost: float | None) -> str | None:
        if self.seconds is not None and self.remaining_seconds() <= 0:
            return "seconds"
        wanted = {"calls": calls, "tokens": tokens, "cost": cost}
        for cap in ("calls", "tokens", "cost"):
            left = self.left(cap)
            if left is None or wanted[cap] is None:  # no cap, or a price nobody knows
                continue
            if wanted[cap] > left + 1e-12:
                return cap
        return None

    def _take(self, calls: int, tokens: int, cost: float) -> None:
        self._reserved["calls"] += calls
        self._reserved["tokens"] += tokens
        self._reserved["cost"] += cost

    def _settle(self, reservation: Reservation, tokens: int, cost: float) -> None:
        with self._lock:
            self._reserved["calls"] -= reservation.calls
            self._reserved["tokens"] -= reservation.tokens
            self._reserved["cost"] -= reservation.cost
            self.used_calls += reservation.calls
            self.used_tokens += tokens
            self.used_cost += cost


_ACTIVE: contextvars.ContextVar[tuple[CallBudget, ...]] = contextvars.ContextVar(
    "synalinks_call_budgets", default=()
)


def active() -> tuple[CallBudget, ...]:
    """The budgets applied in this context (innermost last)."""
    return _ACTIVE.get()


def reserve(calls: int, tokens: int, cost: float | None) -> Reservation | None:
    """Reserve one attempt's bound in every active budget, or raise :class:`BudgetExhausted`
    (then nothing is reserved anywhere). None when no budget is active.

    Args:
        calls: 1 for a completion, 0 for an embedding request.
        tokens: the most tokens the attempt can use (prompt bound plus ``max_tokens``).
        cost: the most it can cost (None: unknown price, not bounded).
    """
    budgets = tuple(dict.fromkeys(_ACTIVE.get()))  # one budget applied twice counts once
    if not budgets:
        return None
    locks = [budget._lock for budget in budgets]
    with contextlib.ExitStack() as stack:
        for lock in locks:
            stack.enter_context(lock)
        for budget in budgets:
            problem = budget._problem(calls, tokens, cost)
            if problem is not None:
                raise budget._refuse(problem)
        for budget in budgets:
            budget._take(calls, tokens, cost or 0.0)
    return Reservation(budgets, calls, tokens, cost or 0.0)


def reserve_for(bound: Callable[[], tuple[int, int, float | None]]) -> Reservation | None:
    """:func:`reserve` of ``bound()``, asked only when a budget is active (no budget: the
    bound is never computed, so calls outside a budget pay nothing for it)."""
    if not _ACTIVE.get():
        return None
    return reserve(*bound())


def token_bound(messages: list[dict], max_tokens: int | None) -> int:
    """An upper bound on the tokens of a completion request: the prompt's UTF-8 bytes (a
    byte-level tokenizer never makes more tokens than bytes), a few per message for the chat
    template, and ``max_tokens`` (:data:`DEFAULT_COMPLETION_TOKENS` when unset)."""
    prompt = sum(len(str(m.get("content") or "").encode()) for m in messages)
    return (
        prompt + TOKENS_PER_MESSAGE * len(messages) + int(max_tokens or DEFAULT_COMPLETION_TOKENS)
    )


def text_token_bound(texts: list[str]) -> int:
    """An upper bound on the tokens of an embedding request (the texts' UTF-8 bytes)."""
    return sum(len(text.encode()) + 2 for text in texts)
