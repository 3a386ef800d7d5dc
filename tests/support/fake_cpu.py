"""A machine whose load a test sets: the ``training.execution.pace.cpu_meter`` source.

Each sample advances a fake clock by ``step`` seconds, the other processes' busy time by
``others`` cores over it and this process's own CPU time by ``own`` cores (None: the rest
of the machine, at most one core: one thread that got what the others left), so a run
or a forecast measured under it meets exactly that load, whatever the real machine does.

Example:
    ```python
    machine = FakeMachine(cores_count=2, others=1.0)
    monkeypatch.setattr(cpu_meter, "source", machine)
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

from training.execution.pace.cpu_meter import CpuSample


@dataclass
class FakeMachine:
    cores_count: int = 2
    others: float = 0.0  # cores the other processes take between two samples
    own: float | None = None  # cores this process takes (None: the rest, at most one)
    step: float = 10.0
    at: float = 0.0
    busy: float = 0.0
    spent: float = 0.0

    def sample(self) -> CpuSample:
        own = (
            self.own if self.own is not None else max(0.0, min(1.0, self.cores_count - self.others))
        )
        self.at += self.step
        self.busy += (self.others + own) * self.step
        self.spent += own * self.step
        return CpuSample(self.at, self.busy, self.spent)

    def cores(self) -> int:
        return self.cores_count
