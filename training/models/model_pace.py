"""What recent runs of a model taught its forecasts, where the workers run it."""

from __future__ import annotations

from django.db import models


class ModelPace(models.Model):
    """What the runs a worker finished on a model observed, where this installation runs it.

    Written by workers only (``training.execution.pace.learning``), read by the launch form's
    forecast, which never waits on a worker. ``sizes``: what recent runs observed per call
    (``observed``: ``training.execution.pace.measured``), the characters per token of their
    prompts, and tokens per call by role (``judge``, ``mutation``) from their traces.
    """

    model = models.CharField(max_length=200, unique=True)
    sizes = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"observations of {self.model}"
