"""A program version served: inputs validated against its data model, one prediction bounded
in time, each request recorded (its page shows the traffic; its LM usage is counted).

Why here and not in the worker: a served call is one prediction a caller waits for, like the
launch form's forecast trial, not a fit; the web process answers it in a thread of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
import pydantic
from django.conf import settings

import training.engine as synalinks
from core.bounded_json import nesting_depth_exceeds
from training.models import Program, ServedCall
from training.programs import programs as program_services
from training.programs import selectors

#: Largest inputs document served (the request's JSON).
MAX_INPUT_BYTES = 64 * 1024
#: Deepest nesting of the inputs document.
MAX_INPUT_NESTING = 20
#: Characters of inputs and outputs kept per recorded request.
KEPT_CHARS = 4_000


class ServeError(ValueError):
    """A request that cannot be served: ``field`` names the input at fault, ``status`` the
    HTTP answer (400 bad input, 404 no such version, 502 the model failed, 504 too slow)."""

    def __init__(self, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.field, self.status = field, status


def _kept(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    return value if len(text) <= KEPT_CHARS else {"truncated": text[:KEPT_CHARS]}


def parse_inputs(raw: bytes) -> Any:
    """The request body as JSON, bounded in size and depth before it is decoded."""
    if len(raw) > MAX_INPUT_BYTES:
        raise ServeError(f"the inputs are larger than {MAX_INPUT_BYTES // 1024} KB")
    text = raw.decode("utf-8", "replace")
    if nesting_depth_exceeds(text, MAX_INPUT_NESTING) is not None:
        raise ServeError(f"the inputs nest deeper than {MAX_INPUT_NESTING} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServeError(f"the body is not JSON: {exc.msg} (position {exc.pos})") from None


def serve(
    owner, program: Program, version: int | None, inputs: Any, token_id=None, token_name=""
) -> dict[str, Any]:
    """Predict ``inputs`` with version ``version`` of ``program`` (None: as created); the
    answer's ``outputs`` and what it cost. ServeError when it cannot."""
    document = program.engine_json
    if version is not None:
        found = selectors.version_of(program, version)
        if found is None:
            raise ServeError(f"the program has no version {version}", "version", 404)
        document = found.engine_json
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
    ServedCall.objects.create(
        program=program,
        version=version,
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
