"""One redirect for buttons that may be pressed over htmx or as a plain form."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect, resolve_url


def page_redirect(request, to, *args, **kwargs) -> HttpResponse:
    """Go to ``to`` (a model, URL or URL name, as ``redirect`` takes) as a whole page.

    Why: an htmx request that got a plain 302 would swap the next page into the fragment
    that sent it; ``HX-Redirect`` makes htmx load it in full (the live page then reconnects
    and re-renders from the database).
    """
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = resolve_url(to, *args, **kwargs)
        return response
    return redirect(to, *args, **kwargs)
