"""A run's tokens and time from what recent runs of its model measured, per call.

The calls are counted exactly (:func:`training.forecasting.forecast.count_calls`); each role's
calls (``prediction``: the program's, the test passes included; ``judge``; ``mutation``: an
optimizer's) then cost what recent finished runs of the model observed per call:

- **Seconds per call** of a role: the run's wall time spread over its calls (an optimizer's
  calls, one at a time, their own latency; the batched calls the rest of the run, overheads
  included, in proportion to their latency), each divided by the slowdown the machine's
  other processes put on the run (:func:`slowdown`: its busy threads and the others' demand
  on the cores). The mean of the last :data:`KEPT` observations, the newest weighing most
  (:data:`NEWEST_WEIGHT`), preferring the runs of the same program with the same optimizer
  (its candidates' prompts: examples, rewritten instructions), then of the same program.
- **Tokens per call** of a role: the same mean of what the runs' traces counted. A run of
  another program or optimizer measured the model's tokens on its own prompts
  (RandomFewShot's examples, OMEGA's rewritten instructions): its figure for the program's
  predictions (the calls sized from their prompts) is scaled by this run's sized prompts
  over its own (:func:`scaled_tokens`); its seconds per call are taken as measured.
- **The load**: the others' demand measured now (``others_now``) gives the expected
  slowdown; the range spans it and the loads the owner's own recent runs met.

A role no run has observed yet (a first LM judge, OMEGA's first mutations) takes its tokens
from this run's sized prompts, and its seconds at the seconds a token keeps a thread busy
in the roles that were observed (a call alone on one thread, as an optimizer's, takes all
of them; a batched call shares them), with the widest range (the first entry of
:data:`SPREAD_BY_COUNT`). When no call of the model was ever observed there is no time
(``seconds`` None): a guess would be a number no measurement backs.

Example:

```python
observations = [Observation(seconds={"prediction": 0.4}, tokens={"prediction": 180})]
found = estimate({"prediction": Span.exact(50)}, observations, others_now=0.1, cores=2,
                 threads={"prediction": 2.0})
found.seconds.expected  # 50 × 0.4 × slowdown(0.1)
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from training.forecasting.forecast import Span

#: Observations kept per model (the newest).
KEPT = 8
#: Weight of each observation against the next older one (an exponential moving average).
NEWEST_WEIGHT = 0.5
#: The range around the expected time by how many runs observed its roles (the fewest; a
#: role timed by runs of another optimizer or program counts none: their own work, such as
#: fitting a decision or embedding a population, is in the pace they measured): (down, up)
#: as factors; more observations than listed take the last, widened by their spread
#: (:func:`_spread`).
SPREAD_BY_COUNT = ((0.33, 3.0), (0.6, 1.8), (0.7, 1.5), (0.75, 1.35))
#: The others' demand (cores' worth) the range allows beyond the most it has seen: a load
#: that rises while the run executes.
LOAD_MARGIN = 0.5
#: Tokens a chat message adds beyond its text (the template's role markers).
MESSAGE_TOKENS = 6
#: Characters per token of prompt text before a run of the model has measured them: an
#: assumption, said in the forecast's words.
DEFAULT_CHARS_PER_TOKEN = 4.0
#: Characters per token of a JSON answer (quotes and braces: denser than prose).
ANSWER_CHARS_PER_TOKEN = 2.0
#: A long structured answer's tokens (a mutation's reasoning and rewrite) before a run of the
#: model has measured them.
LONG_ANSWER_TOKENS = 160.0
#: An LM judge's answer before a run of the model has measured one: its ``JudgeScore`` is a
#: short critique and a score (the demo's judge on local/smollm2 writes about 33 tokens).
JUDGE_ANSWER_TOKENS = 48.0


@dataclass(frozen=True)
class CallSize:
    """Tokens of one call: ``prompt`` sent, ``completion`` generated; ``fresh``: the prompt's
    tokens not shared with the calls before it (None: all of them)."""

    prompt: float
    completion: float
    fresh: float | None = None

    @property
    def total(self) -> float:
        return self.prompt + self.completion


def slowdown(others: float, threads: float, cores: int) -> float:
    """How much slower a run's calls keeping ``threads`` busy go while other processes want
    ``others`` cores' worth of CPU on ``cores`` (fair share; 1.0 when they all fit).

    Example:
        >>> slowdown(2.0, 2.0, 2)  # two busy loops beside two decode threads
        2.0
    """
    cores = max(1, int(cores))
    threads = max(1e-3, min(float(threads), float(cores)))
    return max(1.0, (threads + max(0.0, others)) / cores)


@dataclass(frozen=True)
class Observation:
    """One finished run of a model: per role, idle seconds per call (its wall seconds over
    its slowdown) and tokens per call, and the size per call its forecast gave its prompts
    (``sized_chars``: the sized tokens times the characters per token they were sized at, so
    that forecasts sized at other characters per token compare; absent: not known); the
    others' demand it met, whose run, which program and optimizer."""

    seconds: dict[str, float]
    tokens: dict[str, float]
    others: float = 0.0
    owner: int | None = None
    program: int | None = None
    optimizer: str | None = None
    at: float = 0.0
    sized_chars: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "tokens": self.tokens,
            "sized_chars": {k: round(v, 1) for k, v in self.sized_chars.items()},
            "others": round(self.others, 3),
            "owner": self.owner,
            "program": self.program,
            "optimizer": self.optimizer,
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Observation:
        return cls(
            seconds={k: float(v) for k, v in (data.get("seconds") or {}).items()},
            tokens={k: float(v) for k, v in (data.get("tokens") or {}).items()},
            others=float(data.get("others") or 0.0),
            owner=data.get("owner"),
            program=data.get("program"),
            optimizer=data.get("optimizer"),
            at=float(data.get("at") or 0.0),
            sized_chars={k: float(v) for k, v in (data.get("sized_chars") or {}).items()},
        )


def scaled_tokens(observation: Observation, role: str, sized_chars: dict[str, float]) -> float:
    """``observation``'s tokens per call of ``role``, scaled to a run whose prompts are sized
    at ``sized_chars[role]`` (:class:`Observation`'s unit): times that over what the observed
    run's prompts were sized at (unscaled where either size is unknown).

    Example:
        >>> seen = Observation(seconds={"prediction": 0.4}, tokens={"prediction": 150.0},
        ...                    sized_chars={"prediction": 400.0})
        >>> scaled_tokens(seen, "prediction", {"prediction": 520.0})
        195.0
    """
    tokens = observation.tokens.get(role, 0.0)
    then, now = observation.sized_chars.get(role), sized_chars.get(role)
    if then and now and then > 0 and now > 0:
        return tokens * now / then
    return tokens


def observe(
    roles: dict[str, dict[str, float]],
    wall: float,
    others: float,
    threads: dict[str, float],
    cores: int,
    optimizer_roles: tuple[str, ...] = ("mutation",),
    **where: Any,
) -> Observation | None:
    """The observation of a run that took ``wall`` seconds, from its calls by role
    (``{"calls", "latency", "tokens"}`` each: counts and sums) and the others' demand it met.

    An optimizer's calls (``optimizer_roles``) ran one at a time: their seconds are their
    latency; the other roles share the rest of the wall time (overheads included) in
    proportion to their latency. None when the run made no call."""
    alone = sum(roles[r]["latency"] for r in roles if r in optimizer_roles)
    batched = {r: row for r, row in roles.items() if r not in optimizer_roles}
    latency = sum(row["latency"] for row in batched.values())
    rest = max(0.0, wall - alone)
    seconds: dict[str, float] = {}
    tokens: dict[str, float] = {}
    for role, row in roles.items():
        calls = row["calls"]
        if calls <= 0:
            continue
        if role in optimizer_roles:
            spent = row["latency"]
        else:
            spent = rest * (row["latency"] / latency if latency > 0 else 1 / len(batched))
        seconds[role] = spent / calls / slowdown(others, threads.get(role, 1.0), cores)
        tokens[role] = row["tokens"] / calls
    if not seconds:
        return None
    return Observation(seconds=seconds, tokens=tokens, others=others, **where)


@dataclass(frozen=True)
class Estimate:
    """Tokens and seconds of a run (:class:`Span` each; ``seconds`` None when no call of the
    model was ever observed); ``observed``: how many runs gave each role's figures (0: priced
    from the others); ``slowdown``: expected, by role; ``notes``: in words."""

    tokens: Span
    seconds: Span | None
    observed: dict[str, int] = field(default_factory=dict)
    slowdown: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def moving_mean(values: list[float]) -> float:
    """The exponential moving average of ``values`` (oldest first)."""
    total = weight = 0.0
    w = 1.0
    for value in reversed(values):
        total += w * value
        weight += w
        w *= 1 - NEWEST_WEIGHT
    return total / weight


def _spread(values: list[float]) -> float:
    """Twice the standard deviation of the values' logarithms (0 for fewer than two)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2:
        return 0.0
    mean = sum(logs) / len(logs)
    return 2 * math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def estimate(
    calls: dict[str, Span],
    observations: list[Observation],
    others_now: float,
    cores: int,
    threads: dict[str, float],
    sized: dict[str, float] | None = None,
    program: int | None = None,
    owner: int | None = None,
    optimizer: str | None = None,
    chars_per_token: float | None = None,
) -> Estimate:
    """The tokens and seconds of ``calls`` (a :class:`Span` by role) from ``observations``
    (oldest first), at the others' demand measured now (``others_now`` cores' worth).

    Args:
        calls: the run's calls by role.
        observations: recent runs of the model (:func:`observe`).
        others_now: the other processes' demand on the cores now.
        cores: the machine's cores.
        threads: busy threads of each role's calls (batched: as many as served at once).
        sized: this run's tokens per call by role, sized from its prompts (a role no run
            observed costs these).
        program: the program forecast (its own runs' observations are preferred, those
            with the same ``optimizer`` first).
        owner: the user launching (their recent runs' loads widen the range).
        chars_per_token: what ``sized`` was sized at (None: observed tokens per call are
            taken as they were, not scaled to this run's prompts).
    """
    sized = sized or {}
    size_chars = {r: v * chars_per_token for r, v in sized.items()} if chars_per_token else {}
    mine = [o for o in observations if program is not None and o.program == program]
    closest = [o for o in mine if o.optimizer == optimizer]
    seconds_each: dict[str, float] = {}
    tokens_each: dict[str, float] = {}
    measured_tokens: dict[str, float] = {}  # as the observed runs counted them, unscaled
    observed: dict[str, int] = {}
    own: dict[str, int] = {}  # of them, this program's runs with this optimizer
    spreads: list[float] = []
    for role, span in calls.items():
        if not span.high:
            continue
        pools = ([o for o in group if role in o.seconds] for group in (closest, mine, observations))
        pool, rank = next(((found, rank) for rank, found in enumerate(pools) if found), ([], 0))
        observed[role] = len(pool)
        own[role] = 0 if rank else len(pool)
        if pool:
            seconds_each[role] = moving_mean([o.seconds[role] for o in pool])
            # the same program and optimizer measured these prompts; others, their own
            scale = size_chars if rank else {}
            tokens_each[role] = moving_mean([scaled_tokens(o, role, scale) for o in pool])
            measured_tokens[role] = moving_mean([o.tokens.get(role, 0.0) for o in pool])
            spreads.append(_spread([o.seconds[role] for o in pool]))
        else:
            tokens_each[role] = float(sized.get(role) or 0.0)
    tokens = Span(
        *(
            sum(getattr(calls[r], pick) * tokens_each[r] for r in tokens_each)
            for pick in ("low", "expected", "high")
        )
    )
    notes = []
    for role, count in observed.items():
        if count:
            whose = "" if own[role] else " with another optimizer or program (the widest range)"
            notes.append(
                f"{role} calls as {count} recent run(s) of this model{whose} measured them"
            )
    if not seconds_each:  # no time: the form and the run page say why, once
        return Estimate(tokens=tokens, seconds=None, observed=observed, notes=notes)
    # A role no run observed: the seconds a token took in the observed roles' calls (their
    # tokens as measured, with the seconds they measured). Calls whose provider counted no
    # token give no such figure: no time then, rather than a wild one.
    observed_tokens = sum(calls[r].expected * measured_tokens[r] for r in seconds_each)
    unobserved = [role for role, count in observed.items() if not count]
    if unobserved and observed_tokens <= 0:
        notes.append(
            f"{', '.join(unobserved)} calls: no run of this model made one yet, and its "
            "observed calls counted no tokens to time them by: the time is not known"
        )
        return Estimate(tokens=tokens, seconds=None, observed=observed, notes=notes)
    # Seconds a token keeps one thread busy: a batched call's share of the wall time times
    # the threads serving the batch at once. A call alone on one thread (an optimizer's)
    # takes all of that time; a batched one, its share.
    per_token = sum(
        calls[r].expected * seconds_each[r] * threads.get(r, 1.0) for r in seconds_each
    ) / max(1e-9, observed_tokens)
    for role, count in observed.items():
        if not count:
            seconds_each[role] = per_token * tokens_each[role] / threads.get(role, 1.0)
            notes.append(
                f"{role} calls (no run of this model made one yet) sized from this run's "
                f"prompts, at the {per_token:.4f} s a token keeps a thread busy in its "
                "observed calls: the widest range"
            )
    recent = [o.others for o in observations if owner is not None and o.owner == owner][-3:]
    least = min([others_now, *recent])
    most = max([others_now, *recent]) + LOAD_MARGIN

    def total(at: float, pick: str) -> float:
        return sum(
            getattr(calls[r], pick) * seconds_each[r] * slowdown(at, threads.get(r, 1.0), cores)
            for r in seconds_each
        )

    fewest = min(own.values(), default=0)
    down, up = SPREAD_BY_COUNT[min(fewest, len(SPREAD_BY_COUNT) - 1)]
    if fewest >= len(SPREAD_BY_COUNT) - 1:
        wide = max(spreads, default=0.0)
        down, up = down / (1 + wide), up * (1 + wide)
    expected = total(others_now, "expected")
    seconds = Span(total(least, "low") * down, expected, total(most, "high") * up)
    return Estimate(
        tokens=tokens,
        seconds=seconds,
        observed=observed,
        slowdown={r: slowdown(others_now, threads.get(r, 1.0), cores) for r in seconds_each},
        notes=notes,
    )
