"""Team accounts: an administrator adds members, resets their passwords, deactivates them.

Django's auth holds the accounts (``User``: a member is active, neither staff nor
superuser); these functions are the one place that changes them from the Team page. A new
member gets what every member starts with at once (the demo), through the functions named
in ``TRAINBOARD_NEW_MEMBER_HOOKS`` (the training app registers its demo there: core does not
import the apps above it).
"""

from __future__ import annotations

import logging
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)


class TeamError(ValueError):
    """What an administrator asked cannot be done (the message says why)."""


def temporary_password() -> str:
    """A password shown once to the administrator, to hand to the member."""
    return secrets.token_urlsafe(12)


def welcome(user) -> None:
    """Give a new member what every member starts with (``TRAINBOARD_NEW_MEMBER_HOOKS``)."""
    for path in getattr(settings, "TRAINBOARD_NEW_MEMBER_HOOKS", []):
        import_string(path)(user)


def add_member(username: str, password: str):
    """A new member (not an administrator) with ``password``; welcomed at once."""
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=username, password=password)
        welcome(user)
    logger.info("member %s added", username)
    return user


def reset_password(admin, member, password: str) -> None:
    if member.pk == admin.pk:
        raise TeamError("Change your own password from your account, not here.")
    member.set_password(password)
    member.save(update_fields=["password"])
    logger.info("password of %s reset by %s", member.get_username(), admin.get_username())


def set_active(admin, member, active: bool) -> None:
    """Deactivate or reactivate a member. A deactivated member can no longer log in, and
    their open sessions end with it: Django's auth backend refuses an inactive user on every
    request."""
    if member.pk == admin.pk:
        raise TeamError("You cannot deactivate yourself.")
    member.is_active = active
    member.save(update_fields=["is_active"])
    logger.info(
        "member %s %s by %s",
        member.get_username(),
        "reactivated" if active else "deactivated",
        admin.get_username(),
    )
