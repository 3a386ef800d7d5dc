"""What the other processes on this machine take of its CPUs: the load the measured forecast
normalises each run's seconds by, and meets the next run with.

:func:`sample` / :func:`others_cores`: the machine's busy CPU time (``/proc/stat``: every core,
the hypervisor's steal included) less this process's (``time.process_time``: all its threads,
the llama.cpp ones too), between two samples: the cores the other processes got on average
meanwhile (a run's attempt, a forecast's short sample).

Tests replace :data:`source` (a fake clock and fake counters): no timed assertion needs a
loaded machine.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Protocol

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
