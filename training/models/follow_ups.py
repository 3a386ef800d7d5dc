"""Work asked of a finished run and done by a worker: an ablation of a part of its final
prompt, a judge re-score of its stored predictions.
"""

from __future__ import annotations

from django.db import models

from training.models.runs import Run


class Ablation(models.Model):
    """The final program of a finished run scored without one part of its prompt (an
    instruction sentence or a few-shot example, ``training.insight.ablation``), on the
    examples its final candidate was scored on, paired with that candidate's stored rewards.

    One row per run, variable and part (``key``): a second ask is answered from it, at no
    cost. The worker (``training.execution.ablation``) fills the result in.
    """

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="ablations")
    variable = models.CharField(max_length=200)
    kind = models.CharField(max_length=10)  # "sentence" or "example"
    key = models.CharField(max_length=64)  # sha256 of the part (``ablation.piece_key``)
    value = models.JSONField()  # the variable's value without the part
    split = models.CharField(max_length=12)  # the split scored ("validation", "training")
    rows = models.PositiveIntegerField()  # examples scored (paired with the final's)
    forecast_calls = models.PositiveIntegerField()
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default=QUEUED)
    error = models.TextField(blank=True)
    calls = models.PositiveIntegerField(null=True, blank=True)  # LM calls it made
    example_rewards = models.JSONField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)  # mean without the part
    full_reward = models.FloatField(null=True, blank=True)  # mean with it, same examples
    difference = models.FloatField(null=True, blank=True)  # without − with
    low = models.FloatField(null=True, blank=True)  # paired bootstrap interval of it
    high = models.FloatField(null=True, blank=True)
    within_noise = models.BooleanField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "variable", "key"], name="ablation_unique")
        ]

    @property
    def pending(self) -> bool:
        return self.status in (self.QUEUED, self.RUNNING)


class RescoreJob(models.Model):
    """A judge re-score of a finished run (``training.insight.rescore_jobs``): asked for on
    the run page after its forecast of judge calls, done in a worker, its result kept here
    for the page (the run's own figures never change)."""

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rescore_jobs")
    version = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="+")
    spec = models.JSONField()  # the reward specification scored with
    judge_calls = models.IntegerField(default=0)  # the forecast shown before it was asked
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    result = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    @property
    def pending(self) -> bool:
        return self.status in (self.QUEUED, self.RUNNING)
