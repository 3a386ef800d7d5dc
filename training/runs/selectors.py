"""Reads of runs: every query a page makes about runs and their results, scoped to the user
who asks (programs' reads are ``training.programs.selectors``).

Views never touch the ORM; they call these (reads) or the services of their room (writes).
Each getter filters by owner, so another user's run or candidate is a 404 exactly like one
that does not exist. Querysets come back lazy, with the joins their pages need.

Example:

    run = selectors.owned_run(request.user, pk)        # Http404 if not the user's
    recent = selectors.runs_of(request.user)[:5]
"""

from __future__ import annotations

from django.db.models import ExpressionWrapper, F, FloatField, Prefetch, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from core.ids import as_id
from training import optimizer_registry
from training.execution import summaries
from training.models import (
    Candidate,
    EpochLog,
    Evaluation,
    Run,
    RunTag,
)

COMPARE_CHOICES = 200


# --- programs ------------------------------------------------------------------------------


# --- program versions ----------------------------------------------------------------------


# --- runs ----------------------------------------------------------------------------------


def runs_of(user) -> QuerySet[Run]:
    """The user's runs with program and dataset, newest first."""
    return Run.objects.filter(owner=user).select_related("program", "dataset").order_by("-created")


def has_succeeded_run(user) -> bool:
    """Whether one of the user's runs has succeeded (the home page leads a user without one
    through a first run)."""
    return Run.objects.filter(owner=user, status=Run.SUCCEEDED).exists()


def owned_run(user, pk: int) -> Run:
    """The user's run ``pk`` with program, version and dataset; Http404 otherwise."""
    return get_object_or_404(
        Run.objects.select_related("program", "program_version", "dataset"), pk=pk, owner=user
    )


def owned_runs(user, ids) -> list[Run]:
    """The user's runs among ``ids`` (others' and unknown ids silently left out), by id."""
    wanted = [pk for pk in map(as_id, ids) if pk is not None]
    return list(
        Run.objects.filter(owner=user, pk__in=wanted)
        .select_related("program", "dataset")
        .prefetch_related("tags")
        .order_by("pk")
    )


def run_contents(run: Run) -> dict[str, int]:
    """What deleting ``run`` deletes with it, counted (the confirm page says it)."""
    return {
        "epoch logs": run.epoch_logs.count(),
        "candidates": run.candidates.count(),
        "evaluations": run.evaluations.count(),
        "LM call traces": run.call_traces.count(),
        "optimizer errors": run.optimizer_errors.count(),
    }


def tags_of(user) -> list[str]:
    """Every tag on the user's runs, sorted (the runs list's tag filter)."""
    return sorted(
        set(RunTag.objects.filter(run__owner=user).values_list("name", flat=True)), key=str.lower
    )


# --- the runs list: filters and sorting ------------------------------------------------------

SORTS = {
    "started": ("started_at", "Start"),
    "status": ("status", "Status"),
    "program": ("program__name", "Program"),
    "dataset": ("dataset__name", "Dataset"),
    "best": ("best_reward", "Best val./train"),
    "baseline": ("baseline_reward", "Test before → after"),
    "improvement": ("improvement_value", "Test Δ"),
    "calls": ("lm_calls", "LM calls"),
    "duration": ("duration_value", "Duration"),
}


def runs_for(user, params) -> tuple[list[Run], dict[str, str]]:
    """The user's runs filtered and sorted by query parameters; returns (runs, applied).

    Filters: ``status``, ``optimizer``, ``program``, ``dataset``, ``tag``, ``q`` (program,
    dataset, model or run name), ``archived=1`` (archived runs too; hidden otherwise).
    """
    runs = (
        Run.objects.filter(owner=user)
        .select_related("program", "program_version", "dataset")
        .prefetch_related(Prefetch("tags", queryset=RunTag.objects.order_by("name")))
    )
    applied: dict[str, str] = {}
    if params.get("archived", "") == "1":
        applied["archived"] = "1"
    else:
        runs = runs.filter(archived=False)
    status = params.get("status", "")
    if status in dict(Run.STATUS_CHOICES):
        runs = runs.filter(status=status)
        applied["status"] = status
    optimizer = params.get("optimizer", "")
    if optimizer_registry.offered(optimizer):
        runs = runs.filter(config__optimizer__name=optimizer)
        applied["optimizer"] = optimizer
    for key in ("program", "dataset"):
        value = params.get(key, "")
        if value.isdigit():
            pk = as_id(value)
            if pk is None:  # a number no row can have
                raise Http404(f"No {key} {value[:40]}")
            runs = runs.filter(**{f"{key}_id": pk})
            applied[key] = value
    tag = params.get("tag", "").strip()
    if tag:
        runs = runs.filter(tags__name=tag)
        applied["tag"] = tag
    text = params.get("q", "").strip()
    if text:
        runs = runs.filter(
            Q(program__name__icontains=text)
            | Q(dataset__name__icontains=text)
            | Q(program__model__icontains=text)
            | Q(name__icontains=text)
        )
        applied["q"] = text
    runs = runs.annotate(
        improvement_value=ExpressionWrapper(
            F("final_reward") - F("baseline_reward"),  # test after − test before
            output_field=FloatField(),
        )
    )
    sort = params.get("sort", "-started")
    key = sort.lstrip("-")
    if key not in SORTS:
        sort, key = "-started", "started"
    field = SORTS[key][0]
    applied["sort"] = sort
    if key == "duration":  # computed (running runs count up to now): sorted in Python
        ordered = sorted(runs, key=lambda run: (run.duration is None, run.duration or 0))
        if sort.startswith("-"):
            ordered = [r for r in ordered if r.duration is not None][::-1] + [
                r for r in ordered if r.duration is None
            ]
        return ordered, applied
    expression = (
        F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    )
    return list(runs.order_by(expression, "-id")), applied


def runs_by_ids(user, ids: list[int]) -> list[Run]:
    """The user's runs among ``ids`` (others' silently left out), in id order, with their
    epoch logs and evaluations prefetched (the compare page reads both for every run)."""
    return list(
        Run.objects.filter(owner=user, pk__in=ids)
        .select_related("program", "program_version", "dataset")
        .prefetch_related("epoch_logs", "evaluations")
        .order_by("pk")
    )


def compare_choices(user) -> QuerySet[Run]:
    """The runs the compare page offers to pick from (the model's ordering, capped)."""
    return Run.objects.filter(owner=user).select_related("program", "dataset")[:COMPARE_CHOICES]


def with_test_intervals(runs) -> list[Run]:
    """``runs`` as a list, each with ``test_interval``: the paired bootstrap of its test
    reward after − before (``summaries.paired_test_difference``, the run page's one source),
    or None before both phases are scored. One query for all the runs' evaluations; every
    list that shows a before → after reads it (home, runs list, compare, program page)."""
    runs = list(runs)
    found: dict[int, list[Evaluation]] = {run.pk: [] for run in runs}
    rows = Evaluation.objects.filter(run_id__in=list(found)).only(
        "run_id", "phase", "index", "example_rewards"
    )
    for evaluation in rows:
        found[evaluation.run_id].append(evaluation)
    for run in runs:
        run.test_interval = summaries.paired_test_difference(found[run.pk])
    return runs


def epoch_logs(run: Run) -> QuerySet[EpochLog]:
    """A run's epoch rows (the model's ordering: by epoch)."""
    return run.epoch_logs.all()


def evaluations(run: Run) -> QuerySet[Evaluation]:
    """A run's before/after evaluation rows (the model's ordering: phase, index)."""
    return run.evaluations.all()


def with_parent_links(run: Run, candidates: list[Candidate]) -> list[Candidate]:
    """Give each candidate ``parent_links``: ``(candidate id, parent row pk or None)``."""
    wanted = {(c.variable, p) for c in candidates for p in c.parent_ids or []}
    parent_pks = {}
    if wanted:
        rows = run.candidates.filter(
            candidate_id__in={p for _, p in wanted}, variable__in={v for v, _ in wanted}
        ).values_list("variable", "candidate_id", "pk")
        parent_pks = {(variable, cid): pk for variable, cid, pk in rows}
    for candidate in candidates:
        candidate.parent_links = [
            (cid, parent_pks.get((candidate.variable, cid))) for cid in candidate.parent_ids or []
        ]
    return candidates


def run_candidate(run: Run, candidate_pk: int) -> Candidate:
    """Candidate ``candidate_pk`` of ``run`` (already owner-checked); Http404 otherwise."""
    return get_object_or_404(Candidate, pk=candidate_pk, run=run)
