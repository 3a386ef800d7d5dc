"""What a served program answered: one row per request, for its page's traffic and usage."""

from __future__ import annotations

from django.db import models

from training.models.programs import Program


class ServedCall(models.Model):
    """One request to a served program version (``training.programs.serving``).

    The token is kept by id and name, not as a foreign key: the programs room does not
    depend on the API that calls it, and a revoked token's traffic stays readable."""

    program = models.ForeignKey(Program, on_delete=models.CASCADE, related_name="served_calls")
    version = models.PositiveIntegerField(null=True, blank=True)  # None: as created
    token_id = models.PositiveIntegerField(null=True, blank=True)
    token_name = models.CharField(max_length=100, blank=True)
    inputs = models.JSONField()
    outputs = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    seconds = models.FloatField(default=0.0)
    lm_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created", "-pk"]
