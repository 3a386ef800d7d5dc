"""A judge re-score of a finished run, in a worker.

Why: re-scoring with ``LMAsJudge`` calls the judge once per stored prediction (the test
examples before/after training and every stored candidate's): that can take minutes, so it
never runs in a request. The page first shows the forecast (``rescoring.judge_calls``) and
a confirm; confirming stores a :class:`~training.models.RescoreJob` and sends
:func:`judge_rescore` to a worker, bounded by :data:`JUDGE_RESCORE_SECONDS`; the page polls
the job until it is done. Only the judge is called: the program is not (the stored
predictions are scored), so no prediction call or trace is added.

A plain-prompt parity check (``plain_prompt_parity``) is a job of the same kind: asked on the
run page, stored on a ``RescoreJob`` whose spec says ``plain_prompts``, run by
:func:`parity_rescore` in a worker (it calls the run's model once per test row), polled the
same way.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

import training.engine as synalinks
from datasets.models import Dataset
from training.engine.language_models.redaction import redact
from training.insight import plain_prompt_parity, rescoring
from training.models import RescoreJob, Run

logger = logging.getLogger(__name__)

TASK_NAME = "training.judge_rescore"
PARITY_TASK_NAME = "training.parity_rescore"
#: The longest a judge re-score may take in the worker (then it fails, said on the page).
JUDGE_RESCORE_SECONDS = 600


def ask(run: Run, version: Dataset, spec: dict) -> RescoreJob:
    """Store the job (with the forecast it was confirmed on) and send it to a worker.
    RescoreError when the run cannot be re-scored so."""
    rescoring.check(run, version, spec, allow_model=True)
    job = RescoreJob.objects.create(
        run=run, version=version, spec=spec, judge_calls=rescoring.judge_calls(run)
    )
    judge_rescore.apply_async(args=[job.pk])
    return job


def owned_job(run: Run, job_id: int) -> RescoreJob | None:
    """The run's job ``job_id`` (None if it is not this run's)."""
    return RescoreJob.objects.filter(run=run, pk=job_id).select_related("version").first()


@shared_task(
    name=TASK_NAME,
    soft_time_limit=JUDGE_RESCORE_SECONDS,
    time_limit=JUDGE_RESCORE_SECONDS + 30,
)
def judge_rescore(job_id: int) -> str:
    """Score the run's stored predictions with the job's judge reward; the result (or why
    not, in words) is stored on the job."""

    def work(job: RescoreJob) -> dict:
        result = rescoring.rescore(job.run, job.version, job.spec, allow_model=True)
        result.pop("version", None)
        return result

    return _run_job(job_id, work, "the judge", (rescoring.RescoreError,))


def ask_parity(run: Run) -> RescoreJob:
    """Store a parity check of the run's plain-prompt export and send it to a worker.
    ParityError when the run offers none."""
    plain_prompt_parity.check(run)
    job = RescoreJob.objects.create(
        run=run,
        version=run.dataset,
        spec={"kind": plain_prompt_parity.KIND, **rescoring.reward_spec(run)},
        judge_calls=plain_prompt_parity.test_rows(run),
    )
    parity_rescore.apply_async(args=[job.pk])
    return job


def latest_parity(run: Run) -> RescoreJob | None:
    """The run's newest parity check (None: never asked)."""
    return (
        RescoreJob.objects.filter(run=run, spec__kind=plain_prompt_parity.KIND)
        .order_by("-created", "-id")
        .first()
    )


@shared_task(
    name=PARITY_TASK_NAME,
    soft_time_limit=JUDGE_RESCORE_SECONDS,
    time_limit=JUDGE_RESCORE_SECONDS + 30,
)
def parity_rescore(job_id: int) -> str:
    """Re-score the run's test split from its plain-prompt export alone; the comparison
    with the run's own test score (or why not) is stored on the job."""
    return _run_job(
        job_id,
        lambda job: plain_prompt_parity.check_parity(job.run),
        "the re-score",
        (plain_prompt_parity.ParityError,),
    )


def _run_job(job_id: int, work, who: str, refusals: tuple[type[Exception], ...]) -> str:
    """Claim the queued job, run ``work(job)`` and store its result, or why it failed."""
    job = RescoreJob.objects.filter(pk=job_id, status=RescoreJob.QUEUED).first()
    if job is None:
        return "gone"
    RescoreJob.objects.filter(pk=job.pk).update(status=RescoreJob.RUNNING)
    try:
        result = work(job)
    except SoftTimeLimitExceeded:
        return _failed(job, f"{who} took longer than {JUDGE_RESCORE_SECONDS} s")
    except refusals as exc:
        return _failed(job, str(exc))
    except (synalinks.LanguageModelError, ValueError) as exc:
        return _failed(job, f"{who} failed: {exc}")
    except Exception as exc:  # never left "running" for a page to poll forever
        logger.exception("re-score job %s failed", job.pk)
        return _failed(job, f"{who} failed: {type(exc).__name__}")
    RescoreJob.objects.filter(pk=job.pk).update(
        status=RescoreJob.DONE, result=result, finished=timezone.now()
    )
    return RescoreJob.DONE


def _failed(job: RescoreJob, message: str) -> str:
    logger.warning("re-score job %s failed: %s", job.pk, message)
    RescoreJob.objects.filter(pk=job.pk).update(
        status=RescoreJob.FAILED, error=redact(message)[:500], finished=timezone.now()
    )
    return RescoreJob.FAILED
