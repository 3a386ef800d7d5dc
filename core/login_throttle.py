"""Log-in throttling: a few failed attempts per username and per client address.

Why both: per username stops guessing one account's password from many addresses; per
address stops one client from trying many usernames. Counters live in the cache (one
web process: local memory) and expire TRAINBOARD_LOGIN_WINDOW_SECONDS after the first
failure; a successful log-in clears the username's counter. A throttled attempt is not
checked at all (no password hashing), and answers 429 with the wait in words.
"""

from __future__ import annotations

import hashlib
import logging
import time
import unicodedata

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache

from core.team.services import welcome

logger = logging.getLogger(__name__)

_PREFIX = "login-failures"


def _key(kind: str, value: str) -> str:
    """The counter of ``value``: NFKC-normalised as Django normalises usernames
    (``AbstractBaseUser.normalize_username``) and case-folded, so ``ｃarol`` (a full-width c)
    counts with ``carol``, the account it logs in to."""
    canonical = unicodedata.normalize("NFKC", value).strip().casefold()
    digest = hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()
    return f"{_PREFIX}:{kind}:{digest[:32]}"


def client_address(request) -> str:
    """The peer address daphne saw (behind a proxy, daphne's --proxy-headers sets it)."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def _limits(request, username: str) -> list[tuple[str, int]]:
    return [
        (_key("user", username), settings.TRAINBOARD_LOGIN_FAILURES_PER_USER),
        (_key("addr", client_address(request)), settings.TRAINBOARD_LOGIN_FAILURES_PER_ADDRESS),
    ]


def seconds_blocked(request, username: str) -> int:
    """0 when this attempt may go ahead, else the seconds until it may."""
    now = time.time()
    wait = 0
    for key, allowed in _limits(request, username):
        entry = cache.get(key)
        if entry and entry["count"] >= allowed:
            wait = max(wait, int(entry["until"] - now) + 1)
    return wait


def record_failure(request, username: str) -> None:
    window = settings.TRAINBOARD_LOGIN_WINDOW_SECONDS
    now = time.time()
    for key, _ in _limits(request, username):
        entry = cache.get(key) or {"count": 0, "until": now + window}
        entry["count"] += 1
        cache.set(key, entry, timeout=max(1, int(entry["until"] - now)))


def clear_user(username: str) -> None:
    cache.delete(_key("user", username))


def wait_in_words(seconds: int) -> str:
    minutes = (seconds + 59) // 60
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


class ThrottledLoginView(LoginView):
    """Django's LoginView that refuses (429) after too many failures for a user or address,
    and welcomes a user at their first log-in (:func:`core.team.services.welcome`): an account
    made outside the Team page (``createsuperuser``, the admin, a shell) starts with what
    every member starts with, not on an empty home page until the next start.

    Example:
        ``path("accounts/login/", ThrottledLoginView.as_view(), name="login")``
    """

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        wait = seconds_blocked(request, username)
        if wait:
            form = self.get_form()
            message = (
                "Too many failed log-in attempts for this username or from this address. "
                f"Try again in {wait_in_words(wait)}."
            )
            context = self.get_context_data(form=form, throttled=message)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        record_failure(self.request, self.request.POST.get("username", ""))
        return super().form_invalid(form)

    def form_valid(self, form):
        user = form.get_user()
        clear_user(user.get_username())
        first = user.last_login is None  # Django's log-in sets it
        response = super().form_valid(form)
        if first:
            try:
                welcome(user)
            except Exception:  # the log-in stands; the next start gives what is missing
                logger.exception("user %s: not welcomed at their first log-in", user.pk)
        return response
