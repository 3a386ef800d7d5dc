"""What the other processes on this machine take of its CPUs: a source the forecast reads.

The engine's rule (``training.forecasting.contention``) needs the others' demand. Here it is read
without waiting:

- :func:`sample` / :func:`others_cores`: the machine's busy CPU time (``/proc/stat``: every
  core, the hypervisor's steal included) less this process's (``time.process_time``: all its
  threads, the llama.cpp ones too), between two samples: the cores the other processes got
  on average meanwhile (a calibration's calls, a run's attempt).
- :func:`load_average`: the 1-, 5- and 15-minute load averages (a forecast: the demand now
  and how it has varied).

Tests replace :data:`source` (a fake clock and fake counters): no timed assertion needs a
loaded machine.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Protocol

from training.forecasting.contention import Contention, wanted_threads

STAT_PATH = "/proc/stat"


@dataclass(frozen=True)
class CpuSample:
    """One reading: ``at`` (monotonic seconds), ``busy`` (the machine's busy CPU seconds, all
    cores), ``own`` (this process's CPU seconds)."""

    at: float
    busy: float
    own: float


class Source(Protocol):
    def sample(self) -> CpuSample | None: ...

    def load_average(self) -> tuple[float, float, float] | None: ...

    def cores(self) -> int: ...


class ProcSource:
    """This machine, read from ``/proc`` (None where there is none: not Linux)."""

    def sample(self) -> CpuSample | None:
        try:
            with open(STAT_PATH, encoding="ascii") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu" or len(fields) < 5:
            return None
        ticks = [float(v) for v in fields[1:9]]
        # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
        busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0.0)
        hertz = float(os.sysconf("SC_CLK_TCK") or 100)
        return CpuSample(time.monotonic(), busy / hertz, time.process_time())

    def load_average(self) -> tuple[float, float, float] | None:
        try:
            return os.getloadavg()
        except OSError:
            return None

    def cores(self) -> int:
        return os.cpu_count() or 1


#: Where readings come from (tests put a fake here).
source: Source = ProcSource()


def sample() -> CpuSample | None:
    """A reading now (None: this machine cannot be read)."""
    return source.sample()


def cores() -> int:
    return max(1, int(source.cores()))


def others_cores(start: CpuSample | None, end: CpuSample | None) -> float | None:
    """Cores the other processes got on average between two samples (None: not measured,
    or too short to say: under a second)."""
    if start is None or end is None or end.at - start.at < 1.0:
        return None
    others = (end.busy - start.busy) - (end.own - start.own)
    return min(float(cores()), max(0.0, others / (end.at - start.at)))


def own_seconds(start: CpuSample | None, end: CpuSample | None) -> float | None:
    """This process's CPU seconds between two samples (all its threads; None: not measured)."""
    if start is None or end is None:
        return None
    return max(0.0, end.own - start.own)


def contention_between(
    start: CpuSample | None,
    end: CpuSample | None,
    threads: float,
    idle_seconds: float | None = None,
) -> Contention | None:
    """The others' demand while this process wanted ``threads`` busy between two samples.

    ``idle_seconds``: how long its work takes on an idle machine (a run on a local model: the
    pace's rule for its calls), work known to be CPU-bound: then the threads it wanted are its
    CPU time over that (:func:`~training.forecasting.contention.wanted_threads`), at most
    ``threads``, and the fair share is inverted with what it got (its CPU time over the wall
    time). None: ours is taken to have got the rest of the machine (a calibration's calls).

    Why not its CPU time there: a call that waits (a provider's answer over the network, a
    local call blocked on a core slot another run holds) uses ~0 CPU, and inverting with ~0
    read the others' 1.2 cores as 24 threads: a provider's calibration then divided every
    measured time by 8.5 (0.204 s a call stored as 0.025 s)."""
    used = others_cores(start, end)
    if used is None or start is None or end is None:
        return None
    if idle_seconds is None:
        return Contention.from_usage(used, threads, cores())
    own = own_seconds(start, end) or 0.0
    got = own / (end.at - start.at)
    threads = wanted_threads(own, idle_seconds, most=threads, least=got)
    return Contention.from_usage(used, threads, cores(), own_cores=got)


def load_average() -> tuple[float, float, float] | None:
    """The machine's 1-, 5- and 15-minute load averages (None: unknown)."""
    return source.load_average()
