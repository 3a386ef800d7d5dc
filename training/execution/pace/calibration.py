"""A model's pace where the workers run it: measured by a worker, refined by every run it ends.

The launch form's forecast needs seconds per token on the machine that will run the run. It
reads them here (:func:`current`: one indexed row, ``ModelPace``) and never waits on a
worker:

- **Calibration.** The first time a forecast needs a model that has no pace yet,
  :func:`request` sends the Celery task :data:`CALIBRATION_TASK` (at most one a model every
  :data:`REQUEST_AGAIN_SECONDS`, from a thread: the request answers at once). A worker makes
  a few short calls on the model (:func:`measure`: short answers alone, a long prompt, a long
  structured answer, an LM judge's call, then a burst at once), bounded by
  :data:`CALIBRATION_SECONDS`, fits a :class:`~training.forecasting.pace.Pace` and stores it.
  Meanwhile the form says "measuring". A local model's calls alone and its burst are each
  timed with what the machine's other processes took of its CPUs meanwhile (``cpu_meter``),
  and divided by the slowdown that caused (``training.forecasting.contention``): the pace is for
  an idle machine, whatever load the calibration met. A provider's calls run elsewhere: the
  load here does not slow them, and they are not divided (:func:`decodes_here`).
- **Recent runs.** Every run a worker ends teaches the stored pace what that run took
  (:mod:`training.execution.pace.learning`).

A pace belongs to a model where it is served: a program on a saved endpoint is measured on
that endpoint (:func:`pace_key`: ``"<model> @ <endpoint URL>"``), with the endpoint's key,
read in the worker from the program owner's endpoints (never sent through the broker).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

from celery import shared_task
from pydantic import Field

import training.engine as synalinks
from core import worker_status
from trainboard_local import is_local_model
from training.engine.data_model import DataModel
from training.engine.language_models.redaction import redact
from training.execution.pace import cpu_meter
from training.forecasting.contention import ALONE_THREADS, batch_threads
from training.forecasting.pace import (
    LEARNED_FIELDS,
    CallSize,
    Pace,
    fit_pace,
)
from training.models import ModelPace, Run
from training.programs.lm import ModelStringError, make_language_model

logger = logging.getLogger(__name__)

CALIBRATION_TASK = "training.calibrate_model"
#: Bound on one calibration in the worker (seconds).
CALIBRATION_SECONDS = 120.0
#: A calibration asked for and not stored yet is asked for again after this (seconds).
REQUEST_AGAIN_SECONDS = 180.0
#: Calls started at once to measure how many the model serves together.
BURST = 4

#: The references and predictions of the calibration's LM-judge calls: two wrong answers and
#: two right ones, as a judge meets both. Why several: a small model's critique is 30 to 200
#: tokens from one answer to the next; one call (a wrong answer: 56 tokens) made the demo
#: judge's forecast half its real length (128), and its time 40 % short.
JUDGE_SAMPLES = (
    ({"team": "billing"}, {"team": "shipping"}),
    ({"team": "access"}, {"team": "access"}),
    ({"team": "shipping"}, {"team": "billing"}),
    ({"team": "box"}, {"team": "box"}),
)
#: The prefix of those keys in ``ModelPace.sizes``.
JUDGE_DATA_PREFIX = "judge@"
#: Where a failed calibration's message is kept (in ``ModelPace.sizes``).
FAILURE_KEY = "calibration_error"

_requested: dict[str, float] = {}
_requested_lock = threading.Lock()


# -- reading ----------------------------------------------------------------------------------


def current(model: str) -> tuple[Pace | None, dict[str, Any]]:
    """The stored pace of ``model`` (None: never measured) and its learned ``sizes``."""
    row = ModelPace.objects.filter(model=model).values("pace", "sizes").first()
    if not row or not row["pace"]:
        return None, (row or {}).get("sizes") or {}
    return Pace.from_dict(row["pace"]), row["sizes"] or {}


def learned_size(sizes: dict[str, Any], role: str) -> CallSize | None:
    """A role's tokens per call learned from recent runs (None: none seen yet)."""
    found = sizes.get(role)
    if not isinstance(found, dict):
        return None
    return CallSize(float(found.get("prompt", 0)), float(found.get("completion", 0)))


def judge_data_key(program_id: int | None, dataset_id: int | None) -> str:
    """The key of an LM judge's tokens per call on one program's data, in ``ModelPace.sizes``.

    Example:
        >>> judge_data_key(3, 7)
        'judge@program3/dataset7'
    """
    return f"{JUDGE_DATA_PREFIX}program{program_id}/dataset{dataset_id}"


def pace_key(program_row: Any, model: str) -> tuple[str, str]:
    """(the key ``model``'s pace is stored under for ``program_row``, the saved endpoint's
    name or ""): ``model`` itself, or ``"<model> @ <URL>"`` when the program calls ``model``
    on a saved endpoint (two endpoints serving the same model name are two machines)."""
    from training.programs import saved_endpoints
    from training.programs.programs import model_nodes

    for kind, node in model_nodes(getattr(program_row, "engine_json", None) or {}):
        config = node.get("config") or {}
        if kind != "language_model" or config.get("model") != model:
            continue
        name = str(config.get("endpoint") or "")
        endpoint = saved_endpoints.resolve(program_row.owner, name) if name else None
        if endpoint is not None:
            return f"{model} @ {endpoint.url}", name
    return model, ""


def request(model: str, key: str = "", owner_id: int | None = None, endpoint: str = "") -> None:
    """Ask a worker to calibrate ``model`` (stored under ``key``, :func:`pace_key`; on
    ``owner_id``'s saved ``endpoint`` when one is named), once every
    :data:`REQUEST_AGAIN_SECONDS` per web process, without waiting: the broker is written
    from a thread."""
    key = key or model
    now = time.monotonic()
    with _requested_lock:
        if now - _requested.get(key, -REQUEST_AGAIN_SECONDS) < REQUEST_AGAIN_SECONDS:
            return
        _requested[key] = now
    args = [model] if key == model else [model, key, owner_id, endpoint]

    def send() -> None:
        try:
            calibrate_model.apply_async(args=args, expires=REQUEST_AGAIN_SECONDS, retry=False)
        except Exception:  # the form says "measuring"; the next form asks again later
            logger.warning("could not ask a worker to calibrate %s", key, exc_info=True)
            with _requested_lock:
                _requested.pop(key, None)

    threading.Thread(target=send, name=f"calibrate-{model}", daemon=True).start()


# -- measuring (in a worker) ------------------------------------------------------------------


class _Short(DataModel):
    answer: str = Field(description="yes or no")


class _Long(DataModel):
    """Shaped like a mutation's answer: reasoning, then a long text (two long strings)."""

    thinking: str = Field(description="One sentence on what the team must watch for")
    instructions: str = Field(description="A detailed paragraph of about 100 words")


#: Prompt text like a program's: instructions in prose, and inputs and answers as JSON.
_FILLER = (
    "Decide which team should handle the customer's message, and answer with the code of "
    "that team only, as the examples below show. "
    'Route each message. {"message": "My invoice INV-2291 was charged twice on 3 May", '
    '"team": "billing"} {"message": "I cannot log in since the password reset.", "team": '
    '"access"} {"message": "Parcel #88213 never arrived; the address was right.", "team": '
    '"shipping"} '
)


def _short_prompt(nonce: int, long: bool = False) -> list[dict[str, str]]:
    # The nonce comes first, so no call reuses another's evaluated prompt (a local model
    # keeps the longest shared prefix).
    text = f"Case {nonce}. " + (_FILLER * 3 if long else "") + f"Is {nonce} an even number?"
    return [
        {"role": "system", "content": f"Request {nonce}: answer yes or no."},
        {"role": "user", "content": text},
    ]


def _long_prompt(nonce: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"Request {nonce}: write carefully."},
        {"role": "user", "content": f"Case {nonce}. {_FILLER}Describe how a team should answer."},
    ]


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


async def _timed(
    lm: Any, messages: list, data_model: type, answers: list[int] | None = None
) -> tuple[CallSize, float]:
    with synalinks.usage.track() as usage:
        started = time.perf_counter()
        try:
            output = await lm(messages, data_model)
            if answers is not None:
                answers.append(len(json.dumps(output.get_json(), ensure_ascii=False)))
        except synalinks.LanguageModelError as exc:
            if isinstance(
                exc, synalinks.LanguageModelUnreachable | synalinks.LanguageModelConfigError
            ):
                raise
            # an unparsable answer still measured its call
        seconds = time.perf_counter() - started
    totals = usage.to_dict()
    calls = max(1, int(totals["calls"]))
    size = CallSize(totals["prompt_tokens"] / calls, totals["completion_tokens"] / calls)
    return size, seconds / calls


def _model_maker(model: str, owner_id: int | None, endpoint: str):
    """``make(max_tokens=None)`` -> the engine LM the calibration calls: ``model`` as a
    model string, or on ``owner_id``'s saved ``endpoint`` with its URL and key."""
    if not endpoint:
        return lambda max_tokens=None: make_language_model(model, max_tokens=max_tokens)
    from django.contrib.auth import get_user_model

    from training.programs import endpoint_keys, saved_endpoints
    from training.programs.lm import allow_private_endpoints

    owner = get_user_model().objects.filter(pk=owner_id).first()
    found = saved_endpoints.resolve(owner, endpoint) if owner is not None else None
    if found is None:
        raise ValueError(f"the endpoint {endpoint!r} is not saved (any more)")
    try:
        key = endpoint_keys.decrypt(found.encrypted_key) or None
    except endpoint_keys.KeyUnreadable as exc:
        raise ValueError(f"endpoint {endpoint!r}: {exc}") from None

    def make(max_tokens=None):
        return synalinks.LanguageModel(
            model=model,
            api_base=found.url,
            api_key=key,
            endpoint=endpoint,
            allow_private_addresses=allow_private_endpoints(),
            structured_output=found.structured_output,
            max_tokens=max_tokens,
        )

    return make


def decodes_here(model: str, endpoint: str = "") -> bool:
    """Whether ``model``'s calls decode on this machine's CPUs (a local model, not on a saved
    endpoint): only those slow down with the other processes' demand, so only their
    calibration is divided by the contention it met."""
    return not endpoint and is_local_model(model)


async def _measure(model: str, make=None, local: bool = False) -> Pace:
    """The calibration's calls on ``model`` and the pace they fit; ``local``: its calls
    decode on this machine's CPUs (:func:`decodes_here`), so each part is divided by the
    slowdown the other processes caused; a provider's calls run elsewhere and are not."""
    make = make or _model_maker(model, None, "")
    short_lm = make(max_tokens=16)
    long_lm = make(max_tokens=192)
    nonce = int(time.time()) % 10_000 * 10
    alone_started = cpu_meter.sample()
    await _timed(short_lm, _short_prompt(nonce), _Short)  # warm-up, not measured
    short: list[tuple[CallSize, float]] = []
    answers: list[int] = []
    for offset in (1, 2, 3):
        short.append(await _timed(short_lm, _short_prompt(nonce + offset), _Short, answers))
    long_prompt = await _timed(short_lm, _short_prompt(nonce + 4, long=True), _Short)
    long_answer = await _timed(long_lm, _long_prompt(nonce + 5), _Long)
    judge = await _judge_size(make)
    alone_ended = cpu_meter.sample()
    alone = (
        cpu_meter.contention_between(alone_started, alone_ended, ALONE_THREADS) if local else None
    )
    burst_started = cpu_meter.sample()
    started = time.perf_counter()
    await asyncio.gather(
        *(_timed(short_lm, _short_prompt(nonce + 10 + i), _Short) for i in range(BURST))
    )
    together = (BURST, time.perf_counter() - started)
    # the burst's busy threads: as many as it served at once (no more than its calls, cores)
    raw = BURST * sorted(s for _, s in short)[len(short) // 2] / max(together[1], 1e-6)
    burst_threads = batch_threads(BURST, raw, cpu_meter.cores())
    burst_ended = cpu_meter.sample()
    burst = (
        cpu_meter.contention_between(burst_started, burst_ended, burst_threads) if local else None
    )
    # Characters per prompt token: what the long prompt added over a short one.
    extra_chars = _chars(_short_prompt(nonce + 4, long=True)) - _chars(_short_prompt(nonce + 1))
    extra_tokens = long_prompt[0].prompt - short[0][0].prompt
    completion = sum(size.completion for size, _ in short) / len(short)
    answer_chars = sum(answers) / len(answers) if answers else 0
    return fit_pace(
        short,
        long_prompt,
        long_answer,
        together=together,
        alone=alone,
        burst=burst,
        local=local,
        chars_per_token=extra_chars / extra_tokens if extra_tokens > 0 else 3.0,
        answer_chars_per_token=answer_chars / completion if answer_chars and completion else 2.0,
        long_answer_tokens=long_answer[0].completion or 160.0,
        judge_size=judge,
        source=f"calibration on {os.uname().nodename}",
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        load=_load(),
        contention_at=time.time() if alone else None,
    )


async def _judge_size(make) -> tuple[float, float] | None:
    """Tokens of one call of an LM judge on ``model`` (its own instructions and answer
    schema, as ``LMAsJudge`` asks it, the model's default answer length), the mean over
    :data:`JUDGE_SAMPLES`."""
    from training.engine.modules import Generator
    from training.engine.rewards.judging import JudgeInput, JudgeScore
    from training.engine.rewards.lm_as_judge import DEFAULT_INSTRUCTIONS

    judge = Generator(
        data_model=JudgeScore,
        language_model=make(),
        instructions=DEFAULT_INSTRUCTIONS,
        name="calibration_judge",
    )
    with synalinks.usage.track() as usage:
        for reference, prediction in JUDGE_SAMPLES:
            request = JudgeInput(
                criteria="accuracy and completeness",
                reference=json.dumps(reference),
                prediction=json.dumps(prediction),
            )
            try:
                await judge(request)
            except synalinks.LanguageModelError as exc:
                if isinstance(
                    exc, synalinks.LanguageModelUnreachable | synalinks.LanguageModelConfigError
                ):
                    raise
    totals = usage.to_dict()
    if not totals["calls"]:
        return None
    calls = int(totals["calls"])
    return (totals["prompt_tokens"] / calls, totals["completion_tokens"] / calls)


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def measure(model: str, key: str = "", owner_id: int | None = None, endpoint: str = "") -> Pace:
    """Calibrate ``model`` here (a worker; on ``owner_id``'s saved ``endpoint`` when named): a
    few short calls, bounded by :data:`CALIBRATION_SECONDS`; stored under ``key`` (default
    ``model``) and returned. Raises what the calls raised."""
    make = _model_maker(model, owner_id, endpoint)
    local = decodes_here(model, endpoint)
    pace = asyncio.run(asyncio.wait_for(_measure(model, make, local), CALIBRATION_SECONDS))
    if pace.contention is not None:  # this application's local runs: the forecast's share
        others = max(0.0, pace.contention - own_local_threads(pace.parallel))
        pace = Pace.from_dict({**pace.to_dict(), "contention": round(others, 2)})
    row, _ = ModelPace.objects.get_or_create(model=key or model)
    old = Pace.from_dict(row.pace) if row.pace else None
    # keep what recent runs taught (against an idle machine, and this fit's pricing)
    if old is not None and old.idle and not old.outdated:
        learned = {name: getattr(old, name) for name in LEARNED_FIELDS}
        pace = Pace.from_dict({**pace.to_dict(), **learned})
    row.pace = pace.to_dict()
    row.sizes = {k: v for k, v in (row.sizes or {}).items() if k != FAILURE_KEY}
    row.save(update_fields=["pace", "sizes", "updated"])
    return pace


@shared_task(
    name=CALIBRATION_TASK,
    soft_time_limit=CALIBRATION_SECONDS + 30,
    time_limit=CALIBRATION_SECONDS + 60,
)
def calibrate_model(
    model: str, key: str = "", owner_id: int | None = None, endpoint: str = ""
) -> None:
    """The calibration, in a worker (where the local models are loaded and runs execute); a
    failure is stored in words for the form (:func:`failure`)."""
    key = key or model
    held = worker_status.busy_started(
        f"measuring the pace of {model} (the forecast's calibration)", CALIBRATION_SECONDS + 60
    )
    try:
        measure(model, key, owner_id, endpoint)
    except TimeoutError:
        _failed(
            key, f"the model did not answer a few short calls within {CALIBRATION_SECONDS:.0f} s"
        )
    except synalinks.LanguageModelUnreachable as exc:
        _failed(key, f"the model cannot be reached: {exc}")
    except (ModelStringError, ValueError, synalinks.LanguageModelError) as exc:
        _failed(key, f"the model refused the calibration: {exc}")
    finally:
        worker_status.busy_finished(held)


def own_local_threads(parallel: float, exclude: int | None = None) -> float:
    """Busy threads of this application's local runs running now (``exclude``: the run
    measured), each as many as calls it serves at once (``batch_threads``)."""
    cores = cpu_meter.cores()
    rows = Run.objects.filter(status=Run.RUNNING).exclude(pk=exclude).values_list("forecast")
    threads = 0.0
    for (stored,) in rows[:50]:
        stored = stored or {}
        if stored.get("local"):
            threads += batch_threads(float(stored.get("batch_size") or 1), parallel, cores)
    return threads


def _failed(model: str, message: str) -> None:
    logger.warning("calibration of %s failed: %s", model, message)
    row, _ = ModelPace.objects.get_or_create(model=model)
    sizes = dict(row.sizes or {})
    sizes[FAILURE_KEY] = {"message": redact(message)[:500], "at": time.time()}
    ModelPace.objects.filter(pk=row.pk).update(sizes=sizes)


def failure(sizes: dict[str, Any]) -> str:
    """The last calibration's failure in words, while it is recent ("" otherwise)."""
    found = sizes.get(FAILURE_KEY)
    if (
        not isinstance(found, dict)
        or time.time() - float(found.get("at", 0)) > REQUEST_AGAIN_SECONDS
    ):
        return ""
    return str(found.get("message") or "")
