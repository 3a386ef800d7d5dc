"""Core pages: home, settings, the worker indicator fragment and /healthz."""

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.shortcuts import render
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.health import report, run_checks
from core.providers import configured_providers
from core.worker_status import worker_status as get_worker_status


@require_GET
def settings_page(request):
    return render_settings(request)


def render_settings(request, status: int = 200, **shown):
    """The Settings page; ``shown``: what a section's own view adds (a token just made).

    Sections of other apps come from ``TRAINBOARD_SETTINGS_SECTIONS``: each a function of
    (request, **shown) returning its context with its ``template``."""
    context = {
        "default_lm": settings.TRAINBOARD_LM,
        "default_embedding_model": settings.TRAINBOARD_EMBEDDING_MODEL,
        "upload_max_bytes": settings.TRAINBOARD_UPLOAD_MAX_BYTES,
        "providers": configured_providers(),
        "sections": [
            import_string(path)(request, **shown) for path in settings.TRAINBOARD_SETTINGS_SECTIONS
        ],
    }
    return render(request, "core/settings.html", context, status=status)


@require_GET
@never_cache
def worker_status(request):
    return render(request, "core/partials/worker_status.html", {"status": get_worker_status()})


@login_not_required  # monitors must reach it; it reveals only up/down per component
@require_GET
@never_cache
def healthz(request):
    body, status = report(run_checks())
    return JsonResponse(body, status=status)
