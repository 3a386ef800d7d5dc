"""Sending a queued run again when the broker no longer holds its message.

The database is the source of truth for runs; the broker only carries the news. A Redis
restarted without persistence (or flushed, or out of memory) forgets the messages of queued
runs, and nothing would ever claim them: the run would read "queued" for good, with every
worker idle. So the reaper's loop (``manage.py reap_runs --every``) also looks, each pass,
for queued runs whose task is not waiting in the queue, and sends those again.

A message reserved by a worker does not count: a worker takes a message only when one of
its processes is free (``CELERY_WORKER_DISABLE_PREFETCH``) and claims the run at once, so a
run still queued while its message sits in the broker's reserved set is held by a worker
that died holding it (kill -9, a lost machine): Redis would give it back only after its
visibility timeout, an hour. A message moves from the queue to a worker and a run from
queued to running in steps, so a run is sent again only when its task was missing at two
passes in a row. A message sent twice is
harmless: ``run_state.claim`` starts one attempt once, and the other copy finds the run no
longer queued and does nothing. When the broker cannot be asked, nothing is sent (unknown is
not lost).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import current_app

from training.execution.sending import send_attempt
from training.models import Run

logger = logging.getLogger(__name__)

Key = tuple[int, int, str]  # (run id, attempt, task id)


def broker_task_ids() -> set[str] | None:
    """The ids of the run tasks waiting in the runs' queue (at every priority). None when the
    broker is not Redis (nothing to look into)."""
    app = current_app
    queue = app.conf.task_default_queue
    with app.connection_for_read() as connection:
        channel = connection.default_channel
        client = getattr(channel, "client", None)
        if client is None or not hasattr(channel, "priority_steps"):
            return None
        # kombu prefixes the keys of the commands it sends itself, not of these two
        prefix = getattr(channel, "global_keyprefix", "") or ""
        keys = {prefix + channel._q_for_pri(queue, step) for step in channel.priority_steps}
        waiting = [item for key in sorted(keys) for item in client.lrange(key, 0, -1)]
    return {task_id for item in waiting if (task_id := _task_id(item))}


def _task_id(item: Any) -> str | None:
    """A queued message's task id; None for an entry that is not one (never a reason to stop
    looking)."""
    try:
        message = json.loads(item)
        task_id = (message.get("headers") or {}).get("id")
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    return str(task_id) if task_id else None


class ForgottenRuns:
    """One reaper's memory of the queued runs it found without a waiting message at its last
    pass."""

    def __init__(self) -> None:
        self.missing: set[Key] = set()

    def send_again(self) -> list[int]:
        """Send again each queued run whose task the broker lacked now and at the last pass;
        the ids of the runs sent."""
        queued = set(Run.objects.filter(status=Run.QUEUED).values_list("pk", "attempt", "task_id"))
        if not queued:
            self.missing = set()
            return []
        try:
            held = broker_task_ids()
        except Exception as exc:  # a broker down or restarting: ask again next pass
            logger.warning("queued runs not checked against the broker (%s)", exc)
            return []
        if held is None:
            return []
        missing = {key for key in queued if key[2] not in held}
        again = missing & self.missing
        self.missing = missing - again
        sent = []
        for run_id, attempt, _ in sorted(again):
            logger.warning(
                "run %s attempt %s: the broker lost its message; sending it again", run_id, attempt
            )
            if send_attempt(run_id, attempt, fail_if_refused=False):
                sent.append(run_id)
        return sent
