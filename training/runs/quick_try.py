"""The home page's first run: the launch form's "Quick try" preset, launched in one click, and
its forecast.

Why: a newcomer should press one button and watch a run learn, and every time the dashboard
promises must come from the forecast, not from a sentence written once. So the quick try is
exactly what the launch form would post when opened with ``?program=<id>&preset=quick`` and
left as it is: :func:`quick_form` binds those initial values to a :class:`RunForm` (the same
validation as a launch), :func:`launch` launches it and :func:`forecast` forecasts it with
``training.execution.forecast`` — the figures the form shows beside its Launch button.

Example:

    form = quick_form(user, program)
    if form.is_valid():
        run = launch(user, form)
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from training.execution import forecast as forecast_services
from training.execution import run_config
from training.programs import selectors as program_selectors
from training.programs.demo import DEMO_NAME
from training.runs import launch as run_services
from training.runs import prefill
from training.runs.forms import RunForm

PRESET = "quick"


def first_program(user: Any):
    """The program a newcomer's first run trains: the demo when the user has it, else the
    newest program; None without any."""
    programs = program_selectors.programs_of(user).order_by("-created", "-pk")
    return programs.filter(name=DEMO_NAME).first() or programs.first()


def what_it_launches(program: Any) -> str:
    """What the quick try of ``program`` launches, as the launch form's preset names it
    ("CalibratedLabels, 1 epoch"): the registry's optimizer for such a program."""
    label = run_config.presets(program_selectors.answers_labels(program.pk))[PRESET]["label"]
    return label.split(": ", 1)[-1]


def quick_form(user: Any, program: Any) -> RunForm:
    """A bound launch form holding what ``/runs/new/?program=<id>&preset=quick`` shows."""
    initial = prefill.initial_from_query(user, {"program": str(program.pk), "preset": PRESET})
    unbound = RunForm(user=user, initial=initial)
    data = QueryDict(mutable=True)
    for name, field in unbound.fields.items():
        value = unbound.get_initial_for_field(field, name)
        if value is None or value == "":
            continue
        if isinstance(field, forms.BooleanField):
            if value:
                data[name] = "on"
        elif isinstance(field, forms.MultipleChoiceField):
            data.setlist(name, [str(v) for v in value])
        else:
            data[name] = str(getattr(value, "pk", value))
    return RunForm(data, user=user)


def launch(user: Any, form: RunForm):
    """Launch a valid :func:`quick_form` (as the launch form's POST does)."""
    return run_services.launch(
        user,
        form.cleaned_data["program"],
        form.cleaned_data["dataset"],
        form.run_config,
        version=form.version,
    )


def forecast(user: Any, program: Any) -> dict[str, Any]:
    """The quick try's forecast (``training.execution.forecast.forecast``: no time before a
    first run of the model), or ``{"problem": ...}`` when it cannot be launched."""
    form = quick_form(user, program)
    if not form.is_valid():
        return {"problem": "; ".join(str(e[0]) for e in form.errors.values())}
    return forecast_services.forecast(program, form.cleaned_data["dataset"], form.run_config)
