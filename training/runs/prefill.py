"""The launch form opened pre-filled from its address: ``/runs/new/?program=3&optimizer=...``.

Why: a page that suggests what to try next (the run page's next steps, the home page's
"Quick try") links to the launch form with the change already made, so a new user presses
Launch instead of finding the field. The address carries plain field names of
:class:`~training.runs.forms.RunForm` (``optimizer``, ``epochs``, ``omega_language_model``,
...) and a ``preset`` key (``run_config.presets``); they become the
form's *initial* values only: what is posted is validated as ever, so an address cannot
launch anything by itself, nor set a value the form would refuse.

Example:

    url = launch_url(program=run.program_id, dataset=run.dataset_id, epochs=2)
    # "/runs/new/?program=3&dataset=5&epochs=2"
    initial = initial_from_query(request.user, request.GET)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.forms import BooleanField, MultipleChoiceField
from django.urls import reverse

from core.ids import as_id
from training import optimizer_registry
from training.execution.run_config import presets
from training.programs import selectors as program_selectors
from training.runs.forms import launch_fields

#: Keys handled on their own (the program's ownership decides them), not as plain fields.
OWN_KEYS = ("program", "version", "preset")
#: Characters of one value read from the address (a model string, a mask; never a document).
MAX_VALUE_CHARS = 300
TRUE = ("1", "true", "on", "yes")


def initial_from_query(user: Any, query: Any) -> dict[str, Any]:
    """The launch form's initial values from a query dict (``request.GET``).

    ``program`` (one of ``user``'s) brings its dataset and ``version`` (without one, the
    user's only or newest program is chosen: a form opened from "Launch a run" is ready to
    launch) and the optimizer recommended for what it answers (a label set or not), with the
    epochs that optimizer needs; ``preset`` its values; then every other key naming a form
    field sets that field (last word). Unknown keys and other users' programs are ignored.
    """
    initial: dict[str, Any] = {}
    program_id = as_id(query.get("program", ""))
    if program_id is not None:
        program = program_selectors.owned_program_or_none(user, program_id)
        if program is not None:
            initial = {"program": program.pk, "dataset": program.dataset_id}
            version = query.get("version", "")
            initial["version"] = as_id(version)
    if not initial:  # no program asked for: the only or the newest one
        newest = program_selectors.programs_of(user).order_by("-created", "-pk").first()
        if newest is not None:
            initial = {"program": newest.pk, "dataset": newest.dataset_id, "version": None}
    labels = program_selectors.answers_labels(initial.get("program"))
    name = optimizer_registry.recommended(labels)
    initial["optimizer"] = name
    if optimizer_registry.card(name).epochs:
        initial["epochs"] = optimizer_registry.card(name).epochs
    preset = presets(labels).get(query.get("preset", ""))
    if preset is not None:  # ?preset=quick: the form opens filled with it (no JS needed)
        initial.update(preset["values"])
    for name, field in launch_fields().items():
        if name in OWN_KEYS or name not in query:
            continue
        if isinstance(field, MultipleChoiceField):
            initial[name] = [value[:MAX_VALUE_CHARS] for value in query.getlist(name)]
        elif isinstance(field, BooleanField):
            initial[name] = query.get(name, "").strip().lower() in TRUE
        else:
            initial[name] = query.get(name, "")[:MAX_VALUE_CHARS]
    return initial


def launch_url(**values: Any) -> str:
    """The launch form's address pre-filled with ``values`` (field name: value; None and ""
    are left out, booleans as 1/0)."""
    query = {
        key: int(value) if isinstance(value, bool) else value
        for key, value in values.items()
        if value is not None and value != ""
    }
    url = reverse("training:run-create")
    return f"{url}?{urlencode(query)}" if query else url
