"""Resume a run stopped at a budget cap, with new caps (``training.execution.budget``)."""

from __future__ import annotations

from django.contrib import messages
from django.views.decorators.http import require_POST

from core.redirects import page_redirect
from training.execution import budget
from training.runs import launch as run_services
from training.runs.forms import ResumeBudgetForm
from training.runs.views.runs import owned_run


@require_POST
def run_resume_budget(request, pk: int):
    run = owned_run(request, pk)
    form = ResumeBudgetForm(request.POST, run=run)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{form.fields[field].label}: {errors[0]}")
    else:
        try:
            run = run_services.resume_with_caps(run, form.cleaned_data)
        except budget.BudgetError as exc:
            for field, text in exc.errors.items():
                messages.error(request, f"{budget.LABELS.get(field, field)}: {text}")
        except run_services.ResumeError as exc:
            messages.error(request, str(exc))
    return page_redirect(request, run)
