"""The heartbeat of a running attempt: proof, every few seconds, that its worker is alive.

A thread, not the event loop: a long LM call must not look like a dead worker. If the
process is killed the thread dies with it, the heartbeat stops, and the reaper (here in
another worker, or in the web process) marks the run "failed: worker lost". Beside it, the
attempt's Redis pulse (``pulse.Pulse``, its own thread) proves the worker alive even while
the database write waits for a lock, so a busy database never makes a live worker "lost".
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, connection
from django.utils import timezone

from training import conf
from training.execution.liveness import pulse, reaper
from training.models import Run

logger = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(conf.get("TRAINBOARD_HEARTBEAT_SECONDS"))


def close_connection() -> None:
    """Close this thread's database connection (it must not outlive the attempt)."""
    try:
        connection.close()
    except DatabaseError:  # shared with another thread (test databases): not ours to close
        pass


class Heartbeat(threading.Thread):
    """Writes ``heartbeat_at`` every few seconds while the run executes, and reaps others.

    Starting it starts the attempt's Redis pulse too, and stopping it deletes the pulse. A run
    can still stop being this attempt's while its worker lives (the user resumed it after a
    reaping, e.g. when this worker could reach neither the database nor Redis for longer
    than the stale limit). So each beat checks that the run is still RUNNING for this
    attempt; when it is not, it sets ``superseded``, which the persistence callback reads
    after every batch to stop training and write nothing more (two attempts must never
    write the same run's rows).

    Args:
        run_id: the run being executed.
        attempt: the attempt this worker executes.
        superseded: the event to set when the run is no longer this attempt's (a new one
            by default; shared with the persistence callback).

    Example:
        >>> heartbeat = Heartbeat(run.pk, run.attempt)
        >>> heartbeat.start()
        >>> ...  # train; stop writing once heartbeat.superseded is set
        >>> heartbeat.stop()
    """

    def __init__(self, run_id: int, attempt: int, superseded: threading.Event | None = None):
        super().__init__(name=f"run-{run_id}-heartbeat", daemon=True)
        self.run_id, self.attempt = run_id, attempt
        self.stopped = threading.Event()
        self.pulse = pulse.Pulse(run_id, attempt)
        self.superseded = superseded if superseded is not None else threading.Event()

    def beat(self) -> bool:
        """One heartbeat; False if it could not be written (retried sooner by ``run``)."""
        try:
            alive = Run.objects.filter(
                pk=self.run_id, attempt=self.attempt, status=Run.RUNNING
            ).update(heartbeat_at=timezone.now())
        except DatabaseError as exc:  # "database is locked" for a moment: log, retry
            logger.warning("run %s: heartbeat not written (%s); retrying", self.run_id, exc)
            connection.close_if_unusable_or_obsolete()
            return False
        if not alive and not self.superseded.is_set():
            logger.warning(
                "run %s attempt %s: no longer running for this attempt (reaped or resumed "
                "elsewhere); stopping it without further writes",
                self.run_id,
                self.attempt,
            )
            self.superseded.set()
        try:
            reaper.reap_stale()
        except Exception:  # another run's reaping must not stop this run's heartbeat
            logger.exception("run %s: reaping from the heartbeat failed", self.run_id)
        return True

    def run(self) -> None:
        interval = heartbeat_seconds()
        try:
            delay = interval
            while not self.stopped.wait(delay):
                try:
                    delay = interval if self.beat() else min(1.0, interval)
                except Exception:  # nothing may kill the thread: a dead heartbeat looks lost
                    logger.exception("run %s: heartbeat failed", self.run_id)
                    delay = interval
        finally:
            close_connection()

    def start(self) -> None:
        """Start the pulse first: it needs no database, so it beats from the first second."""
        self.pulse.start()
        super().start()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)
        self.pulse.stop()
