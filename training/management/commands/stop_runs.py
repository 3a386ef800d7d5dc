"""``manage.py stop_runs pause --worker NAME@ [--wait 30]`` and ``manage.py stop_runs resume``.

``make run`` calls ``pause`` when it is stopped (before it stops its worker) and ``prepare``
calls ``resume`` at each start (``training.execution.liveness.shutdown``).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from training.execution.liveness import shutdown


class Command(BaseCommand):
    help = "Pause the runs of a worker that is about to stop; resume them at the next start."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=("pause", "resume"))
        parser.add_argument(
            "--worker", default="", help="the worker name's start, e.g. trainboard@"
        )
        parser.add_argument("--wait", type=float, default=30.0, metavar="SECONDS")

    def handle(self, *args, action, worker, wait, **options):
        if action == "pause":
            asked, paused = shutdown.pause_for_stop(worker, wait)
            if asked:
                self.stdout.write(
                    f"paused {paused} of {asked} running run{'s' if asked > 1 else ''} at the "
                    "next batch; they resume at the next start"
                )
            return
        with transaction.atomic():
            resumed = shutdown.resume_at_start()
        if resumed:
            self.stdout.write(f"resumed {len(resumed)} run(s) paused by the last stop: {resumed}")
