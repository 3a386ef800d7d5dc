"""A run's checkpoint: where Resume goes on from, one row per run, replaced at every
epoch's end and at a pause (``training.execution.recording.persistence``).

``Run.checkpoint_json``, ``checkpoint_epoch`` and ``checkpoint_position`` read it (None
when the run has none yet), so the code that resumes a run reads the same names it did
when they were the run's own columns.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RunCheckpoint(models.Model):
    run = models.OneToOneField(
        "Run", on_delete=models.CASCADE, primary_key=True, related_name="checkpoint"
    )
    # The program (variables + optimizer state, ``Program.get_config()``) after the last
    # completed epoch, or where Pause stopped it inside an epoch. None for a run from code:
    # its program's state lives in the code, only the epochs it completed are known here.
    program = models.JSONField(null=True, blank=True)
    # The last completed epoch (engine epochs, 0-based, as EpochLog stores them; None: none
    # yet, a pause inside the first epoch).
    epoch = models.IntegerField(null=True, blank=True)
    # Where Pause stopped fit inside an epoch: the engine's ``PausePoint`` (the next batch of
    # that epoch, its rewards, metric states and predictions so far); None at an epoch's end.
    position = models.JSONField(null=True, blank=True)
    saved_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"checkpoint of run {self.run_id} (epoch {self.epoch})"
