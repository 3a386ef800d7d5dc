"""The page `make run` opens on: a newcomer's first run one click away (the demo's quick try
and what to look at next), the user's programs one click from a launch, recent runs."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from training.programs import selectors as program_selectors
from training.programs.programs import ProgramError
from training.runs import quick_try, selectors

RECENT = 5


@require_GET
def dashboard(request):
    runs = selectors.runs_of(request.user)
    programs = list(program_selectors.recent_programs(request.user, RECENT))
    # until a run of theirs has succeeded, lead the user through a first one
    first = (
        None if selectors.has_succeeded_run(request.user) else quick_try.first_program(request.user)
    )
    for program in [*programs, *([first] if first else [])]:
        program.quick_launches = quick_try.what_it_launches(program)
    context = {
        "programs": programs,
        "runs": selectors.with_test_intervals(runs[:RECENT]),
        "run_count": runs.count(),
        "first_program": first,
    }
    return render(request, "training/home.html", context)


@require_POST
def quick_try_launch(request, pk: int):
    """One click: launch the quick try of program ``pk`` (the launch form's "Quick try"
    preset, unchanged) and open its run page."""
    program = program_selectors.owned_program(request.user, pk)
    form = quick_try.quick_form(request.user, program)
    if not form.is_valid():
        problems = "; ".join(str(errors[0]) for errors in form.errors.values())
        messages.error(request, f"The quick try of “{program.name}” cannot start: {problems}")
        return redirect("training:home")
    return redirect(quick_try.launch(request.user, form))


@require_GET
@never_cache
def quick_try_forecast(request, pk: int):
    """The quick try's forecast fragment (htmx, loaded after the page)."""
    program = program_selectors.owned_program(request.user, pk)
    try:
        result = quick_try.forecast(request.user, program)
    except (ProgramError, ValueError) as exc:
        result = {"problem": str(exc)}
    return render(
        request,
        "training/partials/quick_try_forecast.html",
        {"forecast": result, "program": program},
    )
