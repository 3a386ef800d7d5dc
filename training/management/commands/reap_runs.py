"""``manage.py reap_runs [--every SECONDS]``: mark runs whose worker died "failed: worker lost".

Without ``--every`` it reaps once and exits (cron-friendly). With it, it loops until SIGTERM
or Ctrl-C: ``make run`` starts it as a supervised child with ``--every 15``, so a worker killed
with -9 leaves its run failed within stale-seconds + 15 s (45 s by default), page open or not.
Each pass of the loop also sends again the queued runs whose message the broker lost
(``forgotten_runs``), so a restarted Redis costs a queued run about two passes (30 s).
Run the same command next to the worker in any other deployment.
"""

from __future__ import annotations

import logging
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from training.execution.liveness import reaper
from training.execution.liveness.forgotten_runs import ForgottenRuns

logger = logging.getLogger("training.reaper")


class Command(BaseCommand):
    help = "Mark running runs with a stale heartbeat as 'failed: worker lost' (once, or in a loop)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--every",
            type=float,
            default=None,
            metavar="SECONDS",
            help="keep running and reap every SECONDS (e.g. 15); default: reap once and exit",
        )
        parser.add_argument(
            "--iterations",
            type=int,
            default=None,
            help="with --every: stop after this many passes (tests)",
        )

    def handle(self, *args, every=None, iterations=None, **options):
        if every is None:
            reaped = reaper.reap_stale()
            self.stdout.write(f"reaped {len(reaped)} run(s){': ' + str(reaped) if reaped else ''}")
            return
        if every <= 0:
            raise CommandError(f"--every must be a number of seconds > 0, got {every}")
        stop = threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():  # stop cleanly between passes
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, lambda *_: stop.set())
        # a long-lived process: its lines go to the log, with a time and a level
        logger.info(
            "reaping runs with a heartbeat older than %.0f s every %g s",
            reaper.stale_after(),
            every,
        )
        try:
            reaped = reaper.reap_forever(
                every, stop=stop, iterations=iterations, also=ForgottenRuns().send_again
            )
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        logger.info("stopped; reaped %d run(s)", len(reaped))
