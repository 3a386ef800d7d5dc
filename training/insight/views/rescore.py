"""Re-scoring a finished run on the run page (``training.insight.rescoring``): on another
version of its dataset and/or with another reward, from the predictions already stored.

``run_rescore`` (GET) scores at once for a reward that needs no model; for a judge it shows
the forecast of judge calls and a confirm, which ``run_rescore_judge`` (POST) sends to a
worker (``rescore_jobs``); ``run_rescore_job`` is what the page polls until it is done.
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.ids import as_id
from training.insight import rescore_jobs, rescoring
from training.runs import selectors

TEMPLATE = "training/partials/run_rescore.html"


def _choice(run, params) -> tuple[object, dict, str]:
    """(version, reward spec, error) from the form's fields: ``version`` (its number; the
    run's own by default), ``reward`` (a name; the run's own reward when absent), ``people``
    (people's marks first), ``ignore`` (fields left out), a judge's ``judge_model`` and
    ``criteria``."""
    choices = rescoring.all_versions(run)
    number = params.get("version", "")
    version = run.dataset
    if as_id(number) is not None:
        version = next((d for d in choices if d.version == as_id(number)), None)
        if version is None:
            return None, {}, f"This dataset has no other version {number}."
    name = params.get("reward", "")
    if not name:
        return version, rescoring.reward_spec(run), ""
    if name not in (*rescoring.RESCORABLE, *rescoring.JUDGED):
        return version, {}, f"{name} is not a reward re-scoring offers."
    ignore = [f for f in params.getlist("ignore") if f in run.dataset.target_names]
    spec = rescoring.reward_spec(run, name, ignore)
    spec["judge_by_people"] = params.get("people") == "1"
    if name in rescoring.JUDGED:
        spec["language_model"] = (params.get("judge_model") or "").strip()[:200] or (
            (run.config.get("reward") or {}).get("language_model") or ""
        )
        spec["criteria"] = (params.get("criteria") or "").strip()[:2000] or (
            (run.config.get("reward") or {}).get("criteria") or "accuracy and completeness"
        )
        if not spec["language_model"]:
            return version, spec, "Name the judge model to re-score with."
    return version, spec, ""


def _context(run, params) -> dict:
    versions_ = rescoring.all_versions(run)
    reward = run.config.get("reward") or {}
    return {
        "judge_model": params.get("judge_model") or reward.get("language_model") or "",
        "judge_criteria": params.get("criteria") or reward.get("criteria") or "",
        "run": run,
        "rescore_versions": versions_,
        "rescore_has_other": len(versions_) > 1,
        "target_names": run.dataset.target_names,
        "run_reward": run.config.get("reward") or {},
        "params": params,
        "ignored": params.getlist("ignore"),
    }


@require_GET
@never_cache
def run_rescore(request, pk: int):
    """The form, and with ``version`` or ``reward`` given, the re-score (or a judge's
    forecast and confirm)."""
    run = selectors.owned_run(request.user, pk)
    context = _context(run, request.GET)
    if "version" in request.GET or "reward" in request.GET:
        version, spec, error = _choice(run, request.GET)
        if error:
            context["rescore_error"] = error
        elif spec.get("name") in rescoring.JUDGED:
            try:
                rescoring.check(run, version, spec, allow_model=True)
                context["judge_forecast"] = {
                    "calls": rescoring.judge_calls(run),
                    "version": version,
                    "spec": spec,
                    "ignore": spec.get("out_mask") or [],
                }
            except rescoring.RescoreError as exc:
                context["rescore_error"] = str(exc)
        else:
            try:
                context["rescored"] = rescoring.rescore(run, version, spec)
            except rescoring.RescoreError as exc:
                context["rescore_error"] = str(exc)
    return render(request, TEMPLATE, context)


@require_POST
def run_rescore_judge(request, pk: int):
    """Confirmed: the judge re-score goes to a worker; the page polls its job."""
    run = selectors.owned_run(request.user, pk)
    context = _context(run, request.POST)
    version, spec, error = _choice(run, request.POST)
    if not error and spec.get("name") not in rescoring.JUDGED:
        error = "Only a judge re-score goes to a worker."
    if not error:
        try:
            context["rescore_job"] = rescore_jobs.ask(run, version, spec)
        except rescoring.RescoreError as exc:
            error = str(exc)
    if error:
        context["rescore_error"] = error
    return render(request, TEMPLATE, context)


@require_GET
@never_cache
def run_rescore_job(request, pk: int, job_id: int):
    """A judge re-score's state; once done, its old and new figures."""
    run = selectors.owned_run(request.user, pk)
    job = rescore_jobs.owned_job(run, job_id)
    if job is None:
        raise Http404("No such re-score.")
    context = _context(run, request.GET)
    context["rescore_job"] = job
    if job.status == job.DONE:
        context["rescored"] = {**(job.result or {}), "version": job.version}
    return render(request, TEMPLATE, context)
