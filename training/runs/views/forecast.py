"""The launch form's forecast: LM calls, tokens, cost and time of the run as configured.

A GET with the form's current values (htmx, debounced as the settings change) answers the
forecast fragment. The form is validated like a launch (the user's own programs and
datasets only: another user's is not a choice); a form that is not complete yet says what
is missing instead of a number.

Nothing here waits on a worker: the figures come from what recent runs of the model observed
(``training.execution.pace.measured``); before any run of it, calls and tokens and no time. The answer echoes the form's revision
(``forecast_revision``, bumped by ``static/training/forecast.js`` on every change), so the page
drops an answer to a form that has changed since.
"""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.ids import whole_number
from training.execution import forecast as forecast_services
from training.execution import forecast_shown
from training.programs.programs import ProgramError
from training.runs.forms import RunForm

TEMPLATE = "training/partials/run_forecast_form.html"


def _revision(request) -> str:
    """The form's revision this answer is for (digits only, bounded: it is echoed)."""
    value = request.GET.get("forecast_revision", "")
    return value if whole_number(value, 12) is not None else ""


@require_GET
@never_cache
def run_forecast(request):
    revision = _revision(request)
    form = RunForm(request.GET, user=request.user)
    if not form.is_valid():
        return render(request, TEMPLATE, {"problem": _first_problem(form), "revision": revision})
    try:
        result = forecast_services.forecast(
            form.cleaned_data["program"], form.cleaned_data["dataset"], form.run_config
        )
    except (ProgramError, ValueError) as exc:
        return render(request, TEMPLATE, {"problem": str(exc), "revision": revision})
    shown = forecast_shown.carry(
        form.cleaned_data["program"],
        form.version,
        form.cleaned_data["dataset"],
        form.run_config,
        result,
    )
    return render(request, TEMPLATE, {"forecast": result, "revision": revision, "shown": shown})


def _first_problem(form: RunForm) -> str:
    for field, errors in form.errors.items():
        if field == "__all__":
            return f"{errors[0]}"
        label = form.fields[field].label if field in form.fields else field
        return f"{label or field}: {errors[0]}"
    return "complete the form"
