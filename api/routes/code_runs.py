"""Runs from code: what ``synalinks.callbacks.RemoteMonitor`` posts while a ``fit`` runs in
the owner's own code (``training.runs.from_code``). A script rarely calls these itself."""

from __future__ import annotations

from typing import Any

from ninja import Router, Schema

from api.auth import StreamRateThrottle
from api.errors import FieldError, json_object
from training.runs import from_code, selectors

router = Router(tags=["runs from code"])

#: Bytes and nesting of one body (the monitor keeps its requests under 1.5 MB).
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_NESTING = 40


class CodeRunOut(Schema):
    id: int
    url: str
    status: str


def _body(request) -> dict[str, Any]:
    return json_object(request, MAX_BODY_BYTES, MAX_NESTING, "a fit's stream")


@router.post("/from-code", response={201: CodeRunOut}, summary="Start a run from your own fit")
def start_run(request):
    """The body: ``program`` (its JSON, ``program.get_config()``), ``rows`` (``[{"inputs":
    {...}, "targets": {...}}]``, what fit was given), ``params`` (fit's: epochs,
    batch_size, samples, ...), ``optimizer`` and ``reward`` (``{"name", "params"}``),
    ``name``. The program is checked like an import; the rows become a dataset."""
    try:
        run = from_code.start(request.user, _body(request))
    except from_code.CodeRunError as exc:
        raise FieldError(str(exc), exc.field) from None
    url = request.build_absolute_uri(run.get_absolute_url())
    return 201, {"id": run.pk, "url": url, "status": run.status}


@router.post(
    "/{int:run_id}/events",
    summary="Post a batch of a fit's events",
    throttle=[StreamRateThrottle()],
)
def post_events(request, run_id: int):
    """``events`` (the engine's, in order), ``traces`` (LM calls), ``usage`` (the fit's so
    far). The answer's ``stop`` is true once Cancel was pressed on the run's page."""
    run = selectors.owned_run(request.user, run_id)
    try:
        return from_code.apply(run, _body(request))
    except from_code.CodeRunError as exc:
        raise FieldError(str(exc), exc.field) from None
