"""Endpoint keys at rest: encrypted with Fernet (``cryptography``), keyed from SECRET_KEY.

The Fernet key is derived from Django's ``SECRET_KEY`` with HKDF-SHA256 (a purpose-named
``info``, so the same secret never serves two uses); every process that shares SECRET_KEY
(web and workers) can decrypt, a database dump alone cannot. Changing SECRET_KEY makes saved
keys unreadable: :func:`decrypt` then says to save the endpoint's key again.

Example:

    token = encrypt("sk-my-server")
    decrypt(token)  # "sk-my-server"
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

INFO = b"trainboard endpoint keys v1"


class KeyUnreadable(ValueError):
    """A saved key that this SECRET_KEY cannot decrypt."""


def _fernet() -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(
        settings.SECRET_KEY.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(key: str) -> str:
    """The token stored for ``key`` ("" stays "": no key)."""
    return _fernet().encrypt(key.encode()).decode() if key else ""


def decrypt(token: str) -> str | None:
    """The key a token holds (None for ""); KeyUnreadable when SECRET_KEY changed."""
    if not token:
        return None
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            "its saved key cannot be read with this server's SECRET_KEY (changed since it was "
            "saved?): save the endpoint's key again in Settings"
        ) from None
