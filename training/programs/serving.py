"""A program version served: inputs validated against its data model, one prediction bounded
in time, each request recorded (its page shows the traffic; its LM usage is counted).

Why here and not in the worker: a served call is one prediction a caller waits for, not a
fit; the web process answers it in the request's own thread (a fresh event loop each time),
at most ``TRAINBOARD_SERVE_AT_ONCE`` at once. A program on a local model loads it into the web
process on its first served call. The time bound cancels the prediction's awaits; a local
model's decode already under way ends at its token bound first.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np
import pydantic
from django.conf import settings
from django.utils import timezone

import training.engine as synalinks
from core.bounded_json import UnsafeJSON, loads_bounded
from training.models import Program, ServedCall
from training.programs import programs as program_services
from training.programs import selectors

#: Largest inputs document served (the request's JSON).
MAX_INPUT_BYTES = 64 * 1024
#: Deepest nesting of the inputs document.
MAX_INPUT_NESTING = 20
#: Characters of inputs and outputs kept per recorded request.
KEPT_CHARS = 4_000


#: Served requests this process predicts at once (each holds a thread, and a local model one
#: of its instances); more wait up to TRAINBOARD_SERVE_SECONDS, then get 503.
SERVING = threading.BoundedSemaphore(settings.TRAINBOARD_SERVE_AT_ONCE)
#: Days of requests kept per program (what its page shows), and most rows kept per program.
KEPT_DAYS = 7
KEPT_ROWS = 10_000


def forget_old_calls(program: Program) -> None:
    """Drop the program's requests older than KEPT_DAYS, and the oldest past KEPT_ROWS: the
    record stays as large as what its page shows."""
    calls = ServedCall.objects.filter(program=program)
    calls.filter(created__lt=timezone.now() - timedelta(days=KEPT_DAYS)).delete()
    cutoff = calls.order_by("-created", "-pk").values_list("pk", flat=True)[
        KEPT_ROWS : KEPT_ROWS + 1
    ]
    if cutoff:
        calls.filter(pk__lte=cutoff[0]).delete()


class ServeError(ValueError):
    """A request that cannot be served: ``field`` names the input at fault, ``status`` the
    HTTP answer (400 bad input, 404 no such version, 409 the program cannot run here, 502 the
    model failed, 503 too many at once, 504 too slow)."""

    def __init__(self, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.field, self.status = field, status


def _kept(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    return value if len(text) <= KEPT_CHARS else {"truncated": text[:KEPT_CHARS]}


def parse_inputs(raw: bytes) -> Any:
    """The request body as JSON, bounded in size and depth before it is decoded."""
    try:
        return loads_bounded(raw, MAX_INPUT_BYTES, MAX_INPUT_NESTING)
    except UnsafeJSON as exc:
        raise ServeError(str(exc)) from None


def serve(
    owner, program: Program, version: int | None, inputs: Any, token_id=None, token_name=""
) -> dict[str, Any]:
    """Predict ``inputs`` with version ``version`` of ``program`` (None: its latest); the
    answer's ``outputs`` and what it cost. ServeError when it cannot."""
    found = selectors.version_or_latest(program, version)
    if version is not None and found is None:
        raise ServeError(f"the program has no version {version}", "version", 404)
    document = found.engine_json if found else program.engine_json
    try:
        engine = program_services.program_from_json(document, owner)
    except program_services.ProgramError as exc:
        raise ServeError(str(exc), status=409) from None
    if len(engine.input_data_models) != 1:
        raise ServeError("only a program with one input data model can be served", status=409)
    if not isinstance(inputs, dict):
        raise ServeError("the body is a JSON object of the program's input fields")
    try:
        x = engine.input_data_models[0].model_validate(inputs)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or None
        raise ServeError(f"{first.get('msg', 'invalid')}", where) from None
    if not SERVING.acquire(timeout=settings.TRAINBOARD_SERVE_SECONDS):
        raise ServeError(
            f"{settings.TRAINBOARD_SERVE_AT_ONCE} requests are being served; retry", status=503
        )
    try:
        return _predict(program, found, engine, x, inputs, token_id, token_name)
    finally:
        SERVING.release()


def _predict(program, found, engine, x, inputs, token_id, token_name) -> dict[str, Any]:
    started = time.monotonic()
    error, outputs = "", None
    with synalinks.usage.track() as usage:
        try:
            predicted = asyncio.run(
                asyncio.wait_for(
                    engine.predict(np.array([x], dtype=object), batch_size=1),
                    settings.TRAINBOARD_SERVE_SECONDS,
                )
            )
            outputs = None if predicted[0] is None else predicted[0].get_json()
            if outputs is None:
                error = "the model's answer could not be used (see the program's model)"
        except TimeoutError:
            error = f"no answer within {settings.TRAINBOARD_SERVE_SECONDS:g} s"
        except Exception as exc:  # an unreachable model, a refused key: said, and recorded
            error = f"the model failed: {exc}"[:500]
    seconds = time.monotonic() - started
    forget_old_calls(program)
    ServedCall.objects.create(
        program=program,
        version=found.number if found else None,
        token_id=token_id,
        token_name=token_name[:100],
        inputs=_kept(inputs),
        outputs=None if outputs is None else _kept(outputs),
        error=error[:500],
        seconds=round(seconds, 3),
        lm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
    )
    if error:
        raise ServeError(error, status=504 if error.startswith("no answer") else 502)
    return {
        "outputs": outputs,
        "seconds": round(seconds, 3),
        "lm_calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
