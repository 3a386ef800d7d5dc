"""Runs: launch (the launch form's validation, forecast and caps), read what the run page
shows (status, history, candidates, per-example results, traces), cancel, pause, resume, and
download the trained program."""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from django.http import QueryDict
from ninja import Router, Schema

from api.errors import FieldError, from_form, json_object
from training.insight import eval_table, plain_prompt_parity
from training.runs import launch as run_services
from training.runs import prefill, selectors
from training.runs.forms import RunForm

router = Router(tags=["runs"])

#: Most rows one read of examples or traces returns (``offset`` pages on).
PAGE_ROWS = 200


class RunOut(Schema):
    id: int
    url: str
    status: str
    source: str
    outcome: str
    phase: str
    error: str
    program_id: int
    program_version: int | None
    dataset_id: int
    optimizer: str
    config: dict[str, Any]
    epochs_done: int
    test_reward_before: float | None
    test_reward_after: float | None
    forecast: dict[str, Any] | None
    lm_calls: int
    usage: dict[str, Any]
    created: str
    started: str | None
    finished: str | None


def _time(value) -> str | None:
    return value.isoformat() if value else None


def run_out(request, run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": request.build_absolute_uri(run.get_absolute_url()),
        "status": run.status,
        "source": run.source,
        "outcome": run.outcome,
        "phase": run.phase,
        "error": run.error,
        "program_id": run.program_id,
        "program_version": run.program_version.number if run.program_version else None,
        "dataset_id": run.dataset_id,
        "optimizer": str(run.config.get("optimizer", "")),
        "config": run.config,
        "epochs_done": run.current_epoch,
        "test_reward_before": run.baseline_reward,
        "test_reward_after": run.final_reward,
        "forecast": run.forecast,
        "lm_calls": run.lm_calls,
        "usage": run.usage,
        "created": run.created.isoformat(),
        "started": _time(run.started_at),
        "finished": _time(run.finished_at),
    }


@router.get("/", response=list[RunOut], summary="Your runs, newest first")
def list_runs(request, limit: int = 50, offset: int = 0):
    runs = selectors.runs_of(request.user).order_by("-created", "-pk")
    limit = max(1, min(limit, PAGE_ROWS))
    return [run_out(request, run) for run in runs[max(0, offset) : max(0, offset) + limit]]


def _form_data(user, body: dict[str, Any]) -> dict[str, Any]:
    """What the launch form would post: its pre-filled values for the program asked for
    (the recommended optimizer and its defaults, as the page opens), then the body's."""
    query = QueryDict(mutable=True)
    for key in ("program", "version", "preset"):
        if body.get(key) not in (None, ""):
            query[key] = str(body[key])
    initial = prefill.initial_from_query(user, query)
    opened = RunForm(user=user, initial=initial)
    data: dict[str, Any] = {}
    for name, field in opened.fields.items():
        value = opened.get_initial_for_field(field, name)
        if isinstance(value, Model):
            value = value.pk
        if value is not None:
            data[name] = value
    data.update({key: value for key, value in body.items() if key != "preset"})
    return data


LAUNCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"type": "object", "additionalProperties": True},
                "example": {"program": 1, "dataset": 1, "preset": "quick"},
            }
        },
    }
}
#: Largest launch body read, and its deepest nesting (a launch names fields; it never
#: carries documents).
MAX_LAUNCH_BYTES = 64 * 1024
MAX_LAUNCH_NESTING = 5


def _json_object(request) -> dict[str, Any]:
    return json_object(request, MAX_LAUNCH_BYTES, MAX_LAUNCH_NESTING, "the launch form's fields")


@router.post(
    "/",
    response={201: RunOut},
    summary="Launch a run, as the launch form does",
    openapi_extra=LAUNCH_BODY,
)
def launch_run(request):
    """The body takes the launch form's field names (``program``, ``dataset``,
    ``optimizer``, ``epochs``, ``batch_size``, ``validation_split``, ``reward``, the
    optimizer's own fields such as ``cal_vote``, ...) or ``preset`` (e.g. ``"quick"``).
    Fields left out take the value the form opens with for that program. The same
    validation, forecast and budget caps as the page: a bad value is answered 400 with its
    field, and nothing is queued."""
    body = _json_object(request)
    unknown = sorted(set(body) - set(RunForm(user=request.user).fields) - {"preset"})
    if unknown:
        raise FieldError(f"{unknown[0]!r} is not a field of the launch form", unknown[0])
    if body.get("program") in (None, ""):
        raise FieldError("Name the program to train (its id).", "program")
    form = RunForm(_form_data(request.user, body), user=request.user)
    if not form.is_valid():
        raise from_form(form)
    run = run_services.launch(
        request.user,
        form.cleaned_data["program"],
        form.cleaned_data["dataset"],
        form.run_config,
        version=form.version,
    )
    return 201, run_out(request, run)


@router.get("/{int:run_id}", response=RunOut, summary="One of your runs")
def get_run(request, run_id: int):
    return run_out(request, selectors.owned_run(request.user, run_id))


@router.get("/{int:run_id}/history", summary="Each epoch's logged rewards and metrics")
def run_history(request, run_id: int):
    run = selectors.owned_run(request.user, run_id)
    return [{"epoch": log.epoch + 1, "logs": log.logs} for log in selectors.epoch_logs(run)]


@router.get("/{int:run_id}/candidates", summary="Every candidate the optimizer proposed")
def run_candidates(request, run_id: int):
    run = selectors.owned_run(request.user, run_id)
    return [
        {
            "id": c.pk,
            "candidate_id": c.candidate_id,
            "variable": c.variable,
            "operation": c.operation,
            "parent_ids": c.parent_ids,
            "epoch": c.epoch,
            "status": c.status,
            "reward": c.reward,
            "value": c.value,
        }
        for c in run.candidates.order_by("epoch", "pk")
    ]


@router.get("/{int:run_id}/examples", summary="Per-example results on the test split")
def run_examples(request, run_id: int, offset: int = 0):
    """Rows as the run page's table and its CSV (before and after training)."""
    run = selectors.owned_run(request.user, run_id)
    rows = eval_table.csv_rows(run, eval_table.TableFilters.from_query(QueryDict()))
    header = next(rows)
    kept = [dict(zip(header, row, strict=False)) for row in rows]
    offset = max(0, offset)
    return {"total": len(kept), "offset": offset, "rows": kept[offset : offset + PAGE_ROWS]}


@router.get("/{int:run_id}/traces", summary="The run's LM calls, in order")
def run_traces(request, run_id: int, offset: int = 0):
    run = selectors.owned_run(request.user, run_id)
    calls = run.call_traces.order_by("seq")
    offset = max(0, offset)
    return {
        "total": calls.count(),
        "offset": offset,
        "calls": [
            {
                "seq": t.seq,
                "role": t.role,
                "model": t.model,
                "split": t.split,
                "example": t.example_index,
                "messages": t.messages,
                "response": t.response,
                "error": t.error,
                "latency": t.latency,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
            }
            for t in calls[offset : offset + PAGE_ROWS]
        ],
    }


@router.post("/{int:run_id}/cancel", response=RunOut, summary="Cancel a queued or running run")
def cancel_run(request, run_id: int):
    run = selectors.owned_run(request.user, run_id)
    return run_out(request, run_services.request_cancel(run))


def _changed(request, run_id: int, change, refusal: type[Exception]):
    """The run after ``change`` (a service of the run page's buttons); 409 with the
    service's reason when the run's state refuses it."""
    run = selectors.owned_run(request.user, run_id)
    try:
        return run_out(request, change(run))
    except refusal as exc:
        raise FieldError(str(exc), status=409) from None


@router.post("/{int:run_id}/pause", response=RunOut, summary="Pause a run after its batch")
def pause_run(request, run_id: int):
    return _changed(request, run_id, run_services.request_pause, run_services.PauseError)


@router.post("/{int:run_id}/resume", response=RunOut, summary="Resume a paused or failed run")
def resume_run(request, run_id: int):
    return _changed(request, run_id, run_services.resume, run_services.ResumeError)


@router.get("/{int:run_id}/program", summary="The trained program's JSON (Program.load)")
def trained_program(request, run_id: int):
    run = selectors.owned_run(request.user, run_id)
    document = run.trained_program_json or run.checkpoint_json
    if document is None:
        raise FieldError("This run has no trained program yet.", status=409)
    return document


@router.get(
    "/{int:run_id}/export/plain-prompts",
    summary="The trained program as plain prompts",
    description=(
        "Per module: the messages every call starts with (system message, few-shot turns), "
        "how the input is added, the output note and response format, the model's settings "
        "(never its key), a label decision's parameters and a retrieval pool's examples and "
        "vectors, and `not_plain`: what sending the messages alone does not reproduce. "
        "409 when the run has no trained program."
    ),
)
def plain_prompts(request, run_id: int):
    run = selectors.owned_run(request.user, run_id)
    try:
        return plain_prompt_parity.export_of(run)
    except plain_prompt_parity.ParityError as exc:
        raise FieldError(str(exc), status=409) from None
