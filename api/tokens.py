"""Making, listing, revoking and checking personal API tokens (services and selectors)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from api.models import ApiToken
from core import token_signing

#: Most live tokens a member may hold (each is a door into their data).
MAX_TOKENS = 20
#: ``last_used`` is written at most this often per token (not once per request).
LAST_USED_EVERY = timedelta(minutes=1)


class TokenError(ValueError):
    pass


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def tokens_of(user):
    return ApiToken.objects.filter(owner=user, revoked__isnull=True)


def create_token(user, name: str) -> tuple[ApiToken, str]:
    """(the stored token, the token itself: shown once, never stored)."""
    name = " ".join((name or "").split())[:100]
    if not name:
        raise TokenError("Name the token (e.g. the script or machine that uses it).")
    if tokens_of(user).count() >= MAX_TOKENS:
        raise TokenError(f"You hold {MAX_TOKENS} tokens already: revoke one first.")
    with transaction.atomic():
        stored = ApiToken.objects.create(owner=user, name=name)
        token = token_signing.mint(stored.pk)
        stored.digest = _digest(token)
        stored.save(update_fields=["digest"])
    return stored, token


def revoke_token(user, pk: int) -> ApiToken | None:
    """Revoke the member's token ``pk`` (None: not theirs or already revoked)."""
    stored = tokens_of(user).filter(pk=pk).first()
    if stored is not None:
        stored.revoked = timezone.now()
        stored.save(update_fields=["revoked"])
    return stored


def authenticate(token: str | None) -> ApiToken | None:
    """The live token ``token`` is, with its active owner; None for anything else."""
    token_id = token_signing.token_id(token)
    if token_id is None:
        return None
    stored = (
        ApiToken.objects.select_related("owner")
        .filter(pk=token_id, revoked__isnull=True, owner__is_active=True)
        .first()
    )
    if stored is None or not hmac.compare_digest(stored.digest or "", _digest(token)):
        return None
    now = timezone.now()
    if stored.last_used is None or now - stored.last_used > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=stored.pk).update(last_used=now)
    return stored
