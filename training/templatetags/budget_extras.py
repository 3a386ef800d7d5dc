"""The run page's forecast-and-budget figures (``training.execution.forecast_text`` /
``training.execution.budget``), so the fragment renders from the run alone (live updates
included)."""

from __future__ import annotations

from django import template

from training.execution import budget, forecast_text
from training.runs.forms import ResumeBudgetForm

register = template.Library()


@register.simple_tag
def forecast_rows(run):
    return forecast_text.comparison(run)


@register.simple_tag
def budget_caps(run):
    """[{"label", "cap", "used", "reached"}] for each cap the run sets."""
    caps = budget.caps_of(run.config or {})
    used = budget.used_of(run)
    stopped_by = budget.stopped_by(run)
    rows = []
    for key, cap in caps.items():
        if cap is None:
            continue
        value = used[key]
        rows.append(
            {
                "key": key,
                "label": budget.LABELS[key],
                "cap": budget.describe(key, cap),
                "used": "unknown" if value is None else budget.describe(key, value),
                "reached": key == stopped_by or (value is not None and value >= cap),
            }
        )
    return rows


@register.simple_tag
def resume_budget_form(run):
    return ResumeBudgetForm(run=run)
