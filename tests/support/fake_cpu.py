"""A machine whose load a test sets: the ``training.execution.cpu_meter`` source.

Each sample advances a fake clock by ``step`` seconds, and the other processes' busy time by
``others`` cores over it (this process's own CPU time stays put), so a calibration or a run
measured under it meets exactly that contention, whatever the real machine does.

Example:
    ```python
    machine = FakeMachine(cores=2, others=1.0, loads=(3.0, 2.0, 1.0))
    monkeypatch.setattr(cpu_meter, "source", machine)
    ```
"""

from __future__ import annotations

from dataclasses import dataclass

from training.execution.cpu_meter import CpuSample


@dataclass
class FakeMachine:
    cores_count: int = 2
    others: float = 0.0  # cores the other processes take between two samples
    loads: tuple[float, float, float] | None = (0.0, 0.0, 0.0)
    step: float = 10.0
    at: float = 0.0
    busy: float = 0.0

    def sample(self) -> CpuSample:
        self.at += self.step
        self.busy += self.others * self.step
        return CpuSample(self.at, self.busy, 0.0)

    def load_average(self) -> tuple[float, float, float] | None:
        return self.loads

    def cores(self) -> int:
        return self.cores_count
