"""Personal API tokens: made and revoked by their owner in Settings, stored hashed."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """One personal token. Only its SHA-256 is kept: the token is shown once, when made.

    SHA-256 and not a password hasher: a token is 32 random bytes, not something a person
    chose, so a slow hash would only slow every API request down.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, null=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:  # the throttle's key: one budget per token
        return f"api-token-{self.pk}"
