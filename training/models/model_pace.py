"""A model's pace where the workers run it, as the forecast reads it."""

from __future__ import annotations

from django.db import models


class ModelPace(models.Model):
    """A model's measured pace where this installation's workers run it.

    Written by workers only (``training.execution.pace.calibration``): a short calibration the
    first time a forecast needs the model, then refined by every run they finish on it. The
    launch form's forecast reads it and never waits on a worker. ``pace``: the engine's
    ``training.forecasting.pace.Pace`` as JSON; ``sizes``: tokens per call by role (``judge``,
    ``mutation``) measured in recent runs' traces, and what recent runs observed per call
    (``observed``: ``training.execution.pace.measured``).
    """

    model = models.CharField(max_length=200, unique=True)
    pace = models.JSONField(default=dict)
    sizes = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"pace of {self.model}"
