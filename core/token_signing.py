"""The form of a personal API token, signed so that it can be recognised without the database.

Why signed: daphne refuses request bodies by size before Django runs (``body_limits.py``), and
only a member may send an upload-sized body. A browser proves it with its signed body pass; a
script proves it with its token, whose signature this server made. The database still decides
whether the token is alive (``api.tokens.authenticate``): a revoked token may at most send a
large body that is then refused.

A token reads ``tb_<id>.<secret>:<signature>``.
"""

from __future__ import annotations

import secrets

from django.core import signing

PREFIX = "tb_"
_SALT = "trainboard.api-token"


def mint(token_id: int) -> str:
    """A new token for the stored token ``token_id`` (its secret is random)."""
    return PREFIX + signing.Signer(salt=_SALT).sign(f"{token_id}.{secrets.token_urlsafe(24)}")


def token_id(token: str | None) -> int | None:
    """The stored token's id when ``token`` carries this server's signature, else None."""
    if not token or not token.startswith(PREFIX) or len(token) > 200:
        return None
    try:
        value = signing.Signer(salt=_SALT).unsign(token[len(PREFIX) :])
    except signing.BadSignature:
        return None
    head, _, _ = value.partition(".")
    return int(head) if head.isdigit() else None


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None
