"""How fast a model answers where a run will execute, and what a run's calls then cost in time.

A forecast's calls come from :func:`training.forecasting.forecast.count_calls`; this module turns
them into tokens and seconds from *measured* figures, never from a fixed ratio:

- :class:`Pace`: one model on one machine. A call alone takes ``call_seconds`` plus
  ``prompt_token_seconds`` per prompt token plus, per generated token, ``short_token_seconds``
  (a short structured answer: a label, a number) or ``long_token_seconds`` (long strings inside
  a JSON answer: a judge's critique, an OMEGA mutation's reasoning and instructions; a local
  model under a JSON-schema grammar is several times slower per token there). ``parallel``
  calls are served at once when many are in flight (a local model: its instances on the
  machine's cores; a provider: its concurrency). ``time_factor``: what recent runs of this
  model took against what this rule said for them (the machine's load, overheads), ``1.0``
  until a run has been measured; ``optimizer_time_factor`` the same for an optimizer's calls
  (OMEGA's mutations and crossovers, one at a time: they slow down under load unlike batched
  calls, which the other runs' calls share cores with). Measured by a worker (its
  calibration) and refined by every run it finishes (:meth:`Pace.learned`).
- :class:`CallSize`: the prompt and completion tokens of one call of a role (a prediction,
  a judgement, a mutation), from the run's own prompts and recent runs' traces.
- :func:`run_time`: the tokens and seconds of a run's calls; ``share`` says how much of the
  model's ``parallel`` the run gets (other runs on the same cores take the rest), and
  ``contention`` (a local model) how much the other processes on the machine slow its calls
  (``training.forecasting.contention``: a pace's figures are for an idle machine, ``Pace.idle``;
  a calibration and each run it learns from are normalised by the load they ran under).

Example:

```python
pace = Pace(call_seconds=0.1, prompt_token_seconds=0.002, short_token_seconds=0.03,
            long_token_seconds=0.09, parallel=2.0)
sizes = {"prediction": CallSize(120, 12), "mutation": CallSize(500, 180)}
tokens, seconds = run_time(count_calls(shape), sizes, pace, batch_size=8)
```
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from training.forecasting.contention import (
    ALONE_THREADS,
    IDLE,
    Contention,
    ContentionSpan,
    batch_threads,
)
from training.forecasting.forecast import CallForecast, Span

#: Work besides LM calls: per training step and candidate (rows stored, pages updated) and
#: per run (claim, program load, evaluations stored).
STEP_OVERHEAD_SECONDS = 0.1
RUN_OVERHEAD_SECONDS = 3.0
#: The time range: the calls' range, then this much either way for how the pace varies from
#: call to call and run to run (``bench/forecast_accuracy.py``).
TIME_SPREAD = 0.25
#: Rounds that find a calibration burst's busy threads under load (:func:`fit_pace`).
BURST_ROUNDS = 12
#: The least share of a calibration's long-answer call its answer's tokens are taken to
#: have cost (the floor under ``long_token_seconds``: this share of the call's time per token
#: beyond the short answer). Why: the rate is a difference against the short calls, and a
#: load spike on those made it 0 ms a token under load (every judge and mutation then free
#: but for a call's fixed cost); measured on an idle machine, the answer is ~95 % of that
#: call (150 tokens at 40 ms against 0.3 s for the rest). Only for a model that decodes on
#: this machine (``fit_pace(local=True)``): a provider's long call is mostly its time to the
#: first token, which the floor priced as answer (its token rate ~doubled), and this
#: machine's load does not slow its calls.
LEAST_ANSWER_SHARE = 0.5
#: The version of the calibration's fit and its contention reading a pace was stored by
#: (``Pace.fit``): 2, the floor under the long-answer rate and the fair share inverted with
#: the process's own CPU time; 3, a provider's calibration not divided by this machine's
#: load (2 divided it by ~8.5 on a busy machine) nor priced by the floor under the long
#: answer's rate (it ~doubled a long time to first token's). A pace of an older one is measured again (its figures, and
#: the factors runs taught against them, priced calls the old way); raise it whenever
#: :func:`fit_pace` or the contention it is given prices calls differently.
FIT_VERSION = 3
#: Tokens of the chat template around each message (a prompt's tokens: its characters at
#: ``Pace.chars_per_token``, plus this per message).
MESSAGE_TOKENS = 6
#: Bounds on a learned ``time_factor`` (one odd run must not make the next forecast absurd).
TIME_FACTOR_BOUNDS = (0.4, 4.0)
#: A learned factor is the median of the last this many runs' ratios (actual / rule) ...
TIME_FACTOR_RUNS = 5
#: ... shrunk toward the rule (1.0) while few runs are known: in log space, ``1 - 2**-n`` of
#: the median after ``n`` runs (half after one, 7/8 after three). Why: one run measured at a
#: high load (another run on the cores) doubled the next forecasts when the first run set
#: the factor outright; the shrinkage halves such a run while it is the only one, the median
#: drops it once three are known, and a machine that is steadily slower is still learnt
#: within a few runs (a fixed prior, ``n / (n + 1)``, left a quarter of it out after three).
TIME_FACTOR_FIRST_WEIGHT = 0.5


@dataclass(frozen=True)
class Pace:
    """One model's measured speed on the machine that runs it (see the module docstring).

    Args:
        call_seconds: the fixed cost of a call alone (request, template, grammar set-up).
        prompt_token_seconds: per prompt token (a provider: 0; in ``call_seconds``).
        short_token_seconds: per generated token of a short structured answer.
        long_token_seconds: per generated token of a long one (judge, mutation).
        parallel: calls served at once when many are in flight (>= 1).
        chars_per_token: characters of prompt text per token (sizes prompts before any call).
        answer_chars_per_token: the same for a JSON answer (quotes and braces: denser).
        long_answer_tokens: what a long structured answer came to (a mutation's size until
            a run of the model has measured one).
        judge_size: ``(prompt, completion)`` tokens of one LM-judge call on a small sample
            (an LM judge's size until a run of the model has measured one; None: not measured).
        time_factor: recent runs' actual time over this rule's, for every call but an
            optimizer's and the overheads (learned; 1.0: none yet).
        runs: how many runs taught ``time_factor``.
        time_ratios: the last :data:`TIME_FACTOR_RUNS` runs' ratios it is drawn from.
        optimizer_time_factor: the same for an optimizer's calls (mutations, crossovers).
        optimizer_runs, optimizer_ratios: how many runs taught it, their last ratios.
        source: where the figures come from, in words ("calibration", "calibration and 3
            recent runs").
        measured_at: when (ISO time); ``load``: the machine's 1-minute load then (None: unknown).
        idle: the figures are for an idle machine (the calibration's calls and the runs it
            learnt from normalised by the others' demand they ran under, ``contention``);
            False: a pace stored before loads were measured (its figures hold whatever load
            it met; it is measured again).
        contention: the other processes' demand (runnable threads) the last measurement
            met (the calibration, then each run it learns from); ``contention_at``: when
            (Unix time; the forecast expects it while it is recent).
        short_answer_tokens: the answer tokens ``call_seconds`` includes (the calibration's
            short answer: a local model's grammar forces all of it but a token or two, so its
            tokens cost no decode step each; 0: a pace fitted before, every token priced).
        fit: the :data:`FIT_VERSION` of the calibration that fitted it (0: before versions).
    """

    call_seconds: float
    prompt_token_seconds: float
    short_token_seconds: float
    long_token_seconds: float
    parallel: float = 1.0
    chars_per_token: float = 3.0
    answer_chars_per_token: float = 2.0
    long_answer_tokens: float = 160.0
    judge_size: tuple[float, float] | None = None
    time_factor: float = 1.0
    runs: int = 0
    time_ratios: tuple[float, ...] = ()
    optimizer_time_factor: float = 1.0
    optimizer_runs: int = 0
    optimizer_ratios: tuple[float, ...] = ()
    source: str = "calibration"
    measured_at: str = ""
    load: float | None = None
    idle: bool = True
    contention: float | None = None
    contention_at: float | None = None
    short_answer_tokens: float = 0.0
    fit: int = FIT_VERSION

    @property
    def outdated(self) -> bool:
        """Fitted by an older calibration (:data:`FIT_VERSION`): to be measured again."""
        return self.fit < FIT_VERSION

    def call(self, size: CallSize, long: bool = False) -> float:
        """Seconds of one call of ``size`` alone: the fixed cost (a short answer included),
        the prompt tokens it evaluates, and each answer token beyond the short answer."""
        per_token = self.long_token_seconds if long else self.short_token_seconds
        answer = max(0.0, size.completion - self.short_answer_tokens)
        return self.call_seconds + size.evaluated * self.prompt_token_seconds + answer * per_token

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pace:
        """A stored pace (unknown keys ignored: an older or newer worker wrote it)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values.setdefault("idle", False)  # stored before a pace was normalised to idle
        values.setdefault("fit", 0)  # stored before fits were versioned
        # JSON gives lists back
        for name in ("judge_size", "time_ratios", "optimizer_ratios"):
            if values.get(name) is not None:
                values[name] = tuple(float(v) for v in values[name])
        return cls(**values)

    def learned(
        self,
        actual: float,
        predicted: float,
        optimizer_actual: float | None = None,
        optimizer_predicted: float | None = None,
    ) -> Pace:
        """This pace after a run whose calls (an optimizer's left out) and overheads took
        ``actual`` seconds where this rule, its factors left out, said ``predicted``, and
        whose optimizer calls took ``optimizer_actual`` where it said ``optimizer_predicted``
        (None: the run had none, or they ran on another model).

        Each factor is the median of its last :data:`TIME_FACTOR_RUNS` ratios, shrunk toward
        1.0 while few runs are known (:data:`TIME_FACTOR_FIRST_WEIGHT`), within :data:`TIME_FACTOR_BOUNDS`.

        Example:
            >>> pace.learned(actual=40.0, predicted=20.0).time_factor  # one slow run: ~1.41
        """
        values = asdict(self)
        batched = _learn(self.time_ratios, self.runs, self.time_factor, actual, predicted)
        if batched is not None:
            values.update(zip(("time_factor", "runs", "time_ratios"), batched, strict=True))
        optimizer = _learn(
            self.optimizer_ratios,
            self.optimizer_runs,
            self.optimizer_time_factor,
            optimizer_actual or 0.0,
            optimizer_predicted or 0.0,
        )
        if optimizer is not None:
            names = ("optimizer_time_factor", "optimizer_runs", "optimizer_ratios")
            values.update(zip(names, optimizer, strict=True))
        return Pace(**values)


def _learn(
    ratios: tuple[float, ...], runs: int, factor: float, actual: float, predicted: float
) -> tuple[float, int, tuple[float, ...]] | None:
    """(factor, runs, ratios) after one more run; None when the run measured nothing."""
    if actual <= 0 or predicted <= 0:
        return None
    low, high = TIME_FACTOR_BOUNDS
    if runs and not ratios:  # learnt before the ratios were kept: the factor stands for one
        ratios = (factor,)
    ratios = (*ratios, min(high, max(low, actual / predicted)))[-TIME_FACTOR_RUNS:]
    runs += 1
    ordered = sorted(ratios)
    middle = len(ordered) // 2
    median = (
        ordered[middle]
        if len(ordered) % 2
        else math.sqrt(ordered[middle - 1] * ordered[middle])  # in log space, as the shrink
    )
    weight = 1.0 - (1.0 - TIME_FACTOR_FIRST_WEIGHT) ** runs
    return min(high, max(low, math.exp(weight * math.log(median)))), runs, ratios


#: The fields a worker's pace learns from runs (a new calibration keeps them).
LEARNED_FIELDS = (
    "time_factor",
    "runs",
    "time_ratios",
    "optimizer_time_factor",
    "optimizer_runs",
    "optimizer_ratios",
)


@dataclass(frozen=True)
class CallSize:
    """Tokens of one call: ``prompt`` sent, ``completion`` generated; ``fresh``: the prompt's
    tokens not shared with the calls before it (a local model keeps the longest shared prefix
    evaluated: the system prompt and examples of one candidate), None: all of them."""

    prompt: float
    completion: float
    fresh: float | None = None

    @property
    def total(self) -> float:
        return self.prompt + self.completion

    @property
    def evaluated(self) -> float:
        """The prompt tokens a call evaluates (its time)."""
        return self.prompt if self.fresh is None else min(self.prompt, self.fresh)


#: The roles whose answers are long strings (:attr:`Pace.long_token_seconds`).
LONG_ROLES = ("judge", "mutation")


@dataclass(frozen=True)
class RunTime:
    """Tokens and seconds of a run: each a :class:`Span` (low / expected / high).

    ``parts``: seconds of each kind of call (``batched``: predictions, judgements and test
    passes, ``optimizer``: mutations and crossovers, ``overhead``), expected. ``slowdown``:
    the factor the machine's other processes put on ``batched`` calls and on calls ``alone``
    (an optimizer's, the overheads) at the expected contention (1.0: an idle machine).
    """

    tokens: Span
    seconds: Span
    parts: dict[str, float] = field(default_factory=dict)
    slowdown: dict[str, float] = field(default_factory=dict)


def run_time(
    calls: CallForecast,
    sizes: dict[str, CallSize],
    pace: Pace,
    batch_size: int,
    share: float = 1.0,
    prediction_sizes: dict[str, CallSize] | None = None,
    role_paces: dict[str, Pace] | None = None,
    contention: ContentionSpan | Contention | None = None,
) -> RunTime:
    """The tokens and seconds of ``calls`` at ``pace``.

    Batched calls (predictions, an LM judge's calls, the test passes) run ``batch_size`` at
    once, served ``min(batch_size, parallel × share)`` at a time; an optimizer's calls run one
    at a time (OMEGA mutates between batches). Each call's time is its pace's ``time_factor``
    times the rule's, the overheads (:func:`overhead_seconds`) the program pace's; then the
    machine's other processes slow them (``contention``: batched calls keep
    :func:`~training.forecasting.contention.batch_threads` busy, an optimizer's call and the
    overheads one). The
    range is the calls' range at the least and the most contention expected, widened by
    :data:`TIME_SPREAD`.

    Args:
        calls: :func:`~training.forecasting.forecast.count_calls`'s forecast.
        sizes: :class:`CallSize` by role: ``prediction`` (required), ``judge``, ``mutation``.
        pace: the model's :class:`Pace` where the run executes.
        batch_size: the run's batch size.
        share: the part of the model's ``parallel`` this run gets (0 < share <= 1: other
            runs decode on the same cores).
        prediction_sizes: the program's calls by part when they differ (``seed``: under the
            first values, ``candidates``: under new candidates, with their examples or
            rewritten instructions); None: ``sizes["prediction"]`` for all.
        role_paces: the pace of a role on another model (``judge``: the reward's model,
            ``mutation``: OMEGA's); None: ``pace`` for every role.
        contention: the other processes' demand on the machine that decodes (a local
            model; a :class:`~training.forecasting.contention.ContentionSpan` for a range); None:
            an idle machine (a provider's calls run elsewhere).

    Returns:
        A :class:`RunTime`.
    """
    prediction = sizes["prediction"]
    judge = sizes.get("judge", prediction)
    mutation = sizes.get("mutation", prediction)
    by_part = prediction_sizes or {}
    seed_size = by_part.get("seed", prediction)
    candidate_size = by_part.get("candidates", prediction)
    candidate_calls = calls.candidate_predictions
    seed_calls = calls.predictions + candidate_calls.scaled(-1)
    after_calls = calls.after_evaluations
    before_calls = calls.evaluations + after_calls.scaled(-1)

    def tokens_of(span: Span, size: CallSize) -> Span:
        return span.scaled(size.total)

    tokens = (
        tokens_of(seed_calls + before_calls, seed_size)
        + tokens_of(candidate_calls + after_calls, candidate_size)
        + tokens_of(calls.judge, judge)
        + tokens_of(calls.optimizer, mutation)
    )
    paces = role_paces or {}
    share = max(share, 1e-3)

    def batched(span: Span, size: CallSize, long: bool = False, on: Pace = pace) -> Span:
        width = max(1.0, min(float(batch_size), on.parallel * share))
        return span.scaled(on.call(size, long) * on.time_factor / width)

    batched_seconds = (
        batched(seed_calls + before_calls, seed_size)
        + batched(candidate_calls + after_calls, candidate_size)
        + batched(calls.judge, judge, long=True, on=paces.get("judge", pace))
    )
    mutation_pace = paces.get("mutation", pace)
    alone_share = min(1.0, mutation_pace.parallel * share)  # one call on a shared machine
    optimizer_seconds = calls.optimizer.scaled(
        mutation_pace.call(mutation, long=True) * mutation_pace.optimizer_time_factor / alone_share
    )
    overhead = overhead_seconds(calls.candidates, calls.steps * calls.epochs).scaled(
        pace.time_factor
    )
    if contention is None:
        contention = IDLE
    span = (
        contention if isinstance(contention, ContentionSpan) else ContentionSpan.exact(contention)
    )

    def slowdowns(on: Contention) -> tuple[float, float]:
        wide = batch_threads(batch_size, pace.parallel, on.cores)
        return on.slowdown(wide), on.slowdown(ALONE_THREADS)

    def total_at(on: Contention) -> Span:
        wide, alone = slowdowns(on)
        return (
            batched_seconds.scaled(wide) + optimizer_seconds.scaled(alone) + overhead.scaled(alone)
        )

    wide, alone = slowdowns(span.expected)
    seconds = Span(
        total_at(span.low).low * (1 - TIME_SPREAD),
        total_at(span.expected).expected,
        total_at(span.high).high * (1 + TIME_SPREAD),
    )
    return RunTime(
        tokens=tokens,
        seconds=seconds,
        parts={
            "batched": batched_seconds.expected * wide,
            "optimizer": optimizer_seconds.expected * alone,
            "overhead": overhead.expected * alone,
        },
        slowdown={"batched": wide, "alone": alone},
    )


def overhead_seconds(candidates: Span, batches: int) -> Span:
    """The work besides LM calls (before ``time_factor``): per candidate and batch, per run."""
    return (candidates + Span.exact(batches)).scaled(STEP_OVERHEAD_SECONDS) + Span.exact(
        RUN_OVERHEAD_SECONDS
    )


def fit_pace(
    short: list[tuple[CallSize, float]],
    long_prompt: tuple[CallSize, float],
    long_answer: tuple[CallSize, float],
    together: tuple[int, float] | None = None,
    alone: Contention | None = None,
    burst: Contention | None = None,
    local: bool = True,
    **extra: Any,
) -> Pace:
    """A :class:`Pace` from a few calls measured one at a time and a burst measured together.

    The differences give the rates, each kept >= 0: a long prompt against a short call gives
    the time of a prompt token; a long answer against a short call (its prompt's share taken
    off) the time of a long answer's token beyond the short answer, at least (a local model)
    :data:`LEAST_ANSWER_SHARE` of the long call's time over those tokens; the short calls' median,
    less its prompt, the fixed cost of a call, its short answer included
    (``short_answer_tokens``): a grammar forces nearly all of a short structured answer, so
    its tokens cost no decode step each (the bench's predictions: 6 tokens, 5 forced, 2 ms).

    Args:
        short: ``(size, seconds)`` of short calls (a short prompt, a short structured answer).
        long_prompt: a call with a long prompt and a short answer.
        long_answer: a call with a short prompt and a long structured answer.
        together: ``(calls, seconds)``: that many short calls started at once, and the wall
            time they took (``parallel`` = calls × a short call's time / wall).
        alone: the other processes' demand while the calls one at a time ran (a local model:
            each was that much slower than on an idle machine); None: an idle machine.
        burst: the same while the burst ran (on ``min(cores, calls)`` threads).
        local: the calls decode on this machine's CPUs (a local model): the floor under the
            long answer's rate applies (:data:`LEAST_ANSWER_SHARE`); False: a provider's.
        **extra: other :class:`Pace` fields (``chars_per_token``, ``source``, ...).

    Returns:
        The pace, for an idle machine (``idle``; ``contention``: ``alone``'s demand).
    """
    if not short:
        raise ValueError("fit_pace needs at least one short call")
    # What the calls would have taken on an idle machine.
    slow = alone.slowdown(ALONE_THREADS) if alone is not None else 1.0
    short = [(size, seconds / slow) for size, seconds in short]
    long_prompt = (long_prompt[0], long_prompt[1] / slow)
    long_answer = (long_answer[0], long_answer[1] / slow)
    if together is not None and burst is not None and together[1] > 0:
        # The burst kept as many threads busy as calls it served at once on an idle machine,
        # which its slowdown hides: found by a few rounds from what was measured.
        calls, wall = together
        raw = calls * sorted(s for _, s in short)[len(short) // 2] / wall
        idle_parallel = raw
        for _ in range(BURST_ROUNDS):
            idle_parallel = raw * burst.slowdown(batch_threads(calls, idle_parallel, burst.cores))
            # Never more calls at once than the burst started, nor than the cores it ran on:
            # a noisy load reading must not make batches look served many at a time.
            idle_parallel = min(idle_parallel, calls, burst.cores)
        together = (calls, calls * sorted(s for _, s in short)[len(short) // 2] / idle_parallel)
    times = sorted(seconds for _, seconds in short)
    base_seconds = times[len(times) // 2]
    base = short[0][0]
    size, seconds = long_prompt
    extra_prompt = size.evaluated - base.evaluated
    prompt = max(0.0, (seconds - base_seconds) / extra_prompt) if extra_prompt > 0 else 0.0
    size, seconds = long_answer
    extra_answer = size.completion - base.completion
    rest = seconds - base_seconds - prompt * (size.evaluated - base.evaluated)
    token = 0.0
    if extra_answer > 0:  # each answer token at least its share of the call (the floor)
        floor = LEAST_ANSWER_SHARE * seconds / extra_answer if local else 0.0
        token = max(rest / extra_answer, floor, 0.0)
    # The short answer stays in the fixed cost: its tokens are not priced at the long
    # answer's rate (a grammar forces nearly all of a short structured answer; pricing them
    # per token made the bench's predictions ~40 % dearer than they were).
    call = max(0.0, base_seconds - prompt * base.evaluated)
    parallel = 1.0
    if together is not None and together[1] > 0:
        parallel = max(1.0, together[0] * base_seconds / together[1])
    return Pace(
        call_seconds=call,
        prompt_token_seconds=prompt,
        short_token_seconds=token,
        long_token_seconds=token,
        parallel=parallel,
        short_answer_tokens=base.completion,
        idle=True,
        contention=None if alone is None else round(alone.others, 2),
        **extra,
    )
