"""Settings → Endpoints: list, save, delete and test saved model servers (htmx fragments)."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from training.programs import saved_endpoints
from training.programs.endpoint_forms import EndpointForm
from training.programs.lm import allow_private_endpoints


def _section(request, form=None, tested=None, status=200):
    context = {
        "endpoints": saved_endpoints.visible_to(request.user),
        "endpoint_form": form or EndpointForm(user=request.user),
        "allow_private": allow_private_endpoints(),
        "test_seconds": saved_endpoints.TEST_SECONDS,
        "tested": tested or {},
    }
    return render(request, "training/partials/endpoints.html", context, status=status)


@require_GET
def endpoint_list(request):
    return _section(request)


@require_POST
def endpoint_create(request):
    form = EndpointForm(request.POST, user=request.user)
    if form.is_valid() and form.save() is not None:
        return _section(request)
    return _section(request, form=form, status=400)


@require_POST
def endpoint_delete(request, pk: int):
    if not saved_endpoints.delete(request.user, pk):
        raise Http404("no such endpoint")
    return _section(request)


@require_POST
def endpoint_test(request, pk: int):
    endpoint = saved_endpoints.visible(request.user, pk)
    if endpoint is None:
        raise Http404("no such endpoint")
    return _section(request, tested={endpoint.pk: saved_endpoints.test_connection(endpoint)})
