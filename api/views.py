"""The Settings page's API tokens section: make one (shown once), revoke one."""

from __future__ import annotations

from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from api import tokens
from core.views import render_settings


def tokens_section(request, **shown) -> dict:
    """The section's context on the Settings page (``TRAINBOARD_SETTINGS_SECTIONS``)."""
    return {"template": "api/tokens.html", "tokens": list(tokens.tokens_of(request.user)), **shown}


@require_POST
def token_create(request):
    """Answered with the Settings page itself, holding the new token: it is in no redirect,
    session or log, only in this one response."""
    try:
        stored, token = tokens.create_token(request.user, request.POST.get("name", ""))
    except tokens.TokenError as exc:
        return render_settings(request, status=400, token_error=str(exc))
    return render_settings(request, new_token=token, new_token_name=stored.name)


@require_POST
def token_revoke(request, pk: int):
    tokens.revoke_token(request.user, pk)
    return redirect("/settings/#api-tokens")
