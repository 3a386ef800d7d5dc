"""Candidates people wrote for a run's live population (``training.runs.hand_candidates``
queues them; ``training.execution.hand_candidates`` hands them to the optimizer at the
worker's next batch end and records what became of each).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class HandCandidate(models.Model):
    QUEUED = "queued"  # waits for the worker's next batch end (a paused run's: its resume)
    ADDED = "added"  # the optimizer took it: ``note`` is its candidate id
    REFUSED = "refused"  # the optimizer refused it: ``note`` says why
    STATE_CHOICES = [(QUEUED, "Queued"), (ADDED, "Added"), (REFUSED, "Refused")]

    run = models.ForeignKey("Run", on_delete=models.CASCADE, related_name="hand_candidates")
    # Its number in the run's queue, from 1 (as the page's message names it).
    number = models.PositiveIntegerField()
    variable = models.CharField(max_length=200)
    # The candidate id it was edited from (its parent in the lineage).
    parent = models.CharField(max_length=50)
    value = models.JSONField()
    state = models.CharField(max_length=10, choices=STATE_CHOICES, default=QUEUED)
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run", "number"], name="hand_candidate_number")
        ]

    def __str__(self) -> str:
        return f"candidate by hand #{self.number} of run {self.run_id}"
