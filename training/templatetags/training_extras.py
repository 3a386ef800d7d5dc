"""Small display filters for run pages (numbers that may be missing, durations)."""

from __future__ import annotations

import json
from datetime import timedelta

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def num(value, digits: int = 3) -> str:
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value):.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def signed(value, digits: int = 3) -> str:
    if value is None:
        return "—"
    return f"{float(value):+.{int(digits)}f}"


@register.filter
def sign_class(value) -> str:
    if value is None:
        return ""
    return "up" if value > 0 else "down" if value < 0 else "flat"


@register.filter
def noise_class(value, interval) -> str:
    """``sign_class`` of a change, but only when its paired bootstrap ``interval`` (a
    ``PairedBootstrap.to_dict()``) puts it beyond noise; "flat" within noise or without an
    interval: a before → after is coloured only where the change is real."""
    if value is None or not interval or interval.get("within_noise", True):
        return "flat" if value is not None else ""
    return sign_class(value)


@register.filter
def duration(value) -> str:
    """``1h 02m``, ``3m 05s``, ``45s`` from a timedelta or seconds (the browser ticks live
    figures on with ``Trainboard.formatDuration``, static/core/trainboard.js: the same format)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = timedelta(seconds=value)
    if not isinstance(value, timedelta):
        return "—"
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


@register.filter
def get(mapping, key):
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def percent(value) -> str:
    if value is None:
        return "—"
    return f"{100 * float(value):.0f}%"


@register.filter
def split_label(key) -> str:
    """A history key with its split spelled out: ``val_reward`` → ``validation reward``,
    ``reward`` → ``training reward`` (fit's logs: training batches, then ``val_`` keys)."""
    key = str(key)
    if key.startswith("val_"):
        return f"validation {key[4:]}"
    return f"training {key}"


@register.filter
def operation_label(value) -> str:
    """A candidate's operation as pages say it: ``by_hand`` is "by hand" (a person's)."""
    return "by hand" if value == "by_hand" else str(value or "")


@register.filter
def json_text(value) -> str:
    """``value`` as compact JSON text (autoescaped where it is shown: LM output is untrusted)."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def breakable(value) -> str:
    """A setting's name (``optimizer.embedding_model``), escaped, that may wrap after each
    ``_``, ``.`` or ``/``: a narrow column (compare's settings at phone width) then breaks it
    between its words, inside one only where that word alone is wider than the column."""
    text = str(escape(value))
    for mark in ("_", ".", "/"):
        text = text.replace(mark, mark + "<wbr>")
    return mark_safe(text)
