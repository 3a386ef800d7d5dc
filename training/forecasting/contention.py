"""How much slower a local model's calls run when other processes share the machine's cores.

A local model decodes on this machine's CPUs. On an idle machine a run's busy threads each
get a core; when other processes want cores too, the kernel shares them (fair share: every
runnable thread gets ``cores / runnable`` of a core) and every call slows by the same factor.
A pace measured under one load and applied under another is off by the ratio of the two, so
:class:`~training.forecasting.pace.Pace` keeps its figures *for an idle machine* and the forecast
multiplies them by the slowdown of the load it expects (:meth:`Contention.slowdown`).

Two ways to know the others' demand (``others``, in runnable threads, on average):

- **Before a run** (a forecast): the machine's load average less this application's own
  threads (its running runs), :meth:`Contention.from_load`.
- **During a measurement** (a calibration, a run): the CPU time the other processes got while
  ours kept ``threads`` busy (the machine's busy time less this process's),
  :meth:`Contention.from_usage`, which inverts the fair share (what others got when ours
  competed with them says how many they were).

Example:
    >>> Contention(others=1.5, cores=2).slowdown(threads=2)  # two decode threads: 1.75x
    1.75
    >>> Contention(others=1.5, cores=2).slowdown(threads=1)  # one mutation alone: 1.25x
    1.25
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Threads a local call keeps busy on its own (one llama.cpp thread an instance, see
#: ``trainboard_local.smollm2``): an optimizer's calls, the work besides calls.
ALONE_THREADS = 1.0
#: The least share of the machine a measured process is taken to have got (a measurement
#: where the others took every core is noise: the process ran).
LEAST_LEFT = 0.05
#: Bound on the others' demand, in cores' worth (a wild measurement must not make a forecast
#: absurd).
MOST_OTHERS_PER_CORE = 8.0


@dataclass(frozen=True)
class Contention:
    """The other processes' demand for CPU on a machine of ``cores`` cores.

    Args:
        others: runnable threads of other processes, on average (0: an idle machine).
        cores: the machine's cores (``os.cpu_count()``).
    """

    others: float = 0.0
    cores: int = 1

    def slowdown(self, threads: float) -> float:
        """How many times longer ``threads`` busy threads take than on an idle machine.

        ``max(1, (others + threads) / cores)``, ``threads`` between 1 and ``cores`` (a run
        never keeps more threads busy than the machine's core slots).
        """
        cores = max(1, int(self.cores))
        threads = max(1.0, min(float(threads), float(cores)))
        return max(1.0, (max(0.0, self.others) + threads) / cores)

    @classmethod
    def from_load(cls, load: float, own: float, cores: int) -> Contention:
        """The others' demand from the machine's load average ``load``, less ``own``
        (runnable threads of this application it counts: its running runs)."""
        cores = max(1, int(cores))
        return cls(_bounded(load - own, cores), cores)

    @classmethod
    def from_usage(
        cls,
        others_cores: float,
        threads: float,
        cores: int,
        own_cores: float | None = None,
    ) -> Contention:
        """The others' demand from what they got: ``others_cores`` cores on average while
        this process wanted ``threads`` of them and got ``own_cores`` (its own CPU time over
        the wall time: ``cpu_meter``). Fair share inverted: every runnable thread got the
        same part of a core, ``own_cores / threads`` of ours (at most a whole one), so the
        others were ``others_cores`` over that part.

        Why ``own_cores``: without it ours is taken to have got the rest of the machine
        (``cores − others_cores``) while wanting ``threads`` all along; a run that wanted
        fewer (its Python between calls, its writes) then reads a few cores of others as
        many threads (1.57 of 2 cores as 5.4 threads: the bench's OMEGA forecast 3.5x slow
        where it ran 1.5x slow). ``threads`` may be under one here (what a run's CPU time
        says it wanted, :func:`wanted_threads`).

        Example:
            >>> Contention.from_usage(others_cores=0.86, threads=2, cores=2).others  # ~1.5
            >>> Contention.from_usage(1.57, threads=0.65, cores=2, own_cores=0.43).others  # ~2.4
        """
        cores = max(1, int(cores))
        threads = max(LEAST_THREADS, min(float(threads), float(cores)))
        used = max(0.0, float(others_cores))
        if used <= cores - threads:  # a core was free for each of ours: no contention
            return cls(_bounded(used, cores), cores)
        got = cores - used if own_cores is None else max(0.0, float(own_cores))
        part = min(1.0, max(got / threads, LEAST_LEFT))  # of a core, each runnable thread
        return cls(_bounded(used / part, cores), cores)


#: The least busy threads a measured process is taken to have wanted (its CPU time can say
#: under one thread; nothing ran at all is no measurement).
LEAST_THREADS = 0.05


def wanted_threads(own_seconds: float, idle_seconds: float, most: float, least: float) -> float:
    """Threads a process kept busy on average, from its CPU time ``own_seconds`` and the
    wall time its work takes on an idle machine ``idle_seconds`` (the pace's rule): between
    ``least`` (the cores it got: it wanted at least those) and ``most`` (the threads its
    calls can keep busy).

    Why: CPU time is the work, whatever the load; over the idle wall time it says how much
    of the machine the work wants, where the wall time under load says only what it got.

    Example:
        >>> wanted_threads(own_seconds=13.0, idle_seconds=20.0, most=1.5, least=0.4)
        0.65
    """
    if idle_seconds <= 0 or own_seconds <= 0:
        return max(least, LEAST_THREADS)
    return max(least, LEAST_THREADS, min(most, own_seconds / idle_seconds))


def _bounded(others: float, cores: int) -> float:
    return min(max(0.0, float(others)), MOST_OTHERS_PER_CORE * cores)


def batch_threads(batch_size: float, parallel: float, cores: int) -> float:
    """Threads a batch of calls keeps busy: as many as calls the model serves at once (its
    measured ``parallel``), at most the batch and the cores.

    Why not every core: a small local model's per-token Python and grammar work leaves its
    llama.cpp threads idle part of the time (two instances serve ~1.3 calls at once on two
    cores); taking two busy threads made the bench's forecasts 1.5x too slow under load.
    """
    return max(1.0, min(float(cores), float(batch_size), float(parallel)))


#: No other process: the figures a pace keeps.
IDLE = Contention()


@dataclass(frozen=True)
class ContentionSpan:
    """The others' demand a forecast expects (``expected``: now) and the least and most it
    allows for while the run lasts (``low`` / ``high``: how the load has varied lately)."""

    low: Contention
    expected: Contention
    high: Contention

    @classmethod
    def exact(cls, contention: Contention) -> ContentionSpan:
        return cls(contention, contention, contention)

    @classmethod
    def from_loads(
        cls, loads: tuple[float, ...], own: tuple[float, ...], cores: int
    ) -> ContentionSpan:
        """From the load averages over :data:`LOAD_WINDOWS`, each less ``own`` (what this
        application's runs count in it, :func:`load_share`): the 1-minute one is the
        expected demand, the least and the most of them the range."""
        others = [
            Contention.from_load(load, mine, cores) for load, mine in zip(loads, own, strict=False)
        ]
        return cls(min(others, key=_demand), others[0], max(others, key=_demand))


def _demand(contention: Contention) -> float:
    return contention.others


#: The load averages' windows (seconds): Linux damps each exponentially over 1, 5, 15 min.
LOAD_WINDOWS = (60.0, 300.0, 900.0)


def load_share(threads: float, lasted: float, ended_ago: float, window: float) -> float:
    """What ``threads`` busy threads for ``lasted`` seconds, ended ``ended_ago`` seconds ago
    (0: still busy), still count in a load average damped over ``window`` seconds.

    Why: a run that just ended still weighs in the 1-minute load (two threads a minute
    ago are ~0.7 of it); a forecast that took it for another process would expect a slower
    machine than the one the next run gets.

    Example:
        >>> round(load_share(threads=2, lasted=120, ended_ago=60, window=60), 2)
        0.64
    """
    if threads <= 0 or lasted <= 0 or window <= 0:
        return 0.0
    return threads * math.exp(-max(0.0, ended_ago) / window) * (1 - math.exp(-lasted / window))
