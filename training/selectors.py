"""Reads of the training app: every query a page makes, scoped to the user who asks.

Views never touch the ORM; they call these (reads) or ``training.services`` (writes). Each
getter filters by owner, so another user's program, run or candidate is a 404 exactly like
one that does not exist. Querysets come back lazy, with the joins their pages need.

Example:

    run = selectors.owned_run(request.user, pk)        # Http404 if not the user's
    recent = selectors.runs_of(request.user)[:5]
"""

from __future__ import annotations

from django.db.models import Count, ExpressionWrapper, F, FloatField, Prefetch, Q, QuerySet
from django.shortcuts import get_object_or_404

from training.models import (
    Candidate,
    EpochLog,
    Evaluation,
    Program,
    ProgramVersion,
    Run,
    RunTag,
)
from training.services.run_config import OPTIMIZERS

PROGRAM_RUNS_SHOWN = 20
COMPARE_CHOICES = 200


# --- programs ------------------------------------------------------------------------------


def programs_of(user) -> QuerySet[Program]:
    """The user's programs with their dataset, newest first (the model's ordering)."""
    return Program.objects.filter(owner=user).select_related("dataset")


def recent_programs(user, limit: int) -> QuerySet[Program]:
    """The user's ``limit`` newest programs with their dataset."""
    return programs_of(user).order_by("-created")[:limit]


def program_choices(user) -> QuerySet[Program]:
    """Only what a filter drop-down needs: id and name."""
    return Program.objects.filter(owner=user).only("id", "name")


def owned_program(user, pk: int) -> Program:
    """The user's program ``pk`` with its dataset; Http404 otherwise."""
    return get_object_or_404(Program.objects.select_related("dataset"), pk=pk, owner=user)


def owned_program_or_none(user, pk: int) -> Program | None:
    """For a ``?program=`` hint: the user's program ``pk``, or None (never an error)."""
    return Program.objects.filter(pk=pk, owner=user).first()


def runs_of_program(program: Program, limit: int = PROGRAM_RUNS_SHOWN) -> QuerySet[Run]:
    """A program's latest runs for its page."""
    return program.runs.select_related("dataset", "program_version").order_by("-created")[:limit]


# --- program versions ----------------------------------------------------------------------


def versions_of(program: Program) -> list[ProgramVersion]:
    """A program's versions, newest first, each with its source run and parent, and
    ``run_count`` (runs launched from it)."""
    return list(
        program.versions.select_related("source_run", "parent")
        .annotate(run_count=Count("runs"))
        .order_by("-number")
    )


def version_of(program: Program, number) -> ProgramVersion | None:
    """Version ``number`` of ``program`` (already owner-checked), or None."""
    try:
        number = int(number)
    except (TypeError, ValueError):
        return None
    return program.versions.filter(number=number).first()


def latest_version(program: Program) -> ProgramVersion | None:
    """The program's highest-numbered version (None only for a program never saved)."""
    return program.versions.order_by("-number").first()


# --- runs ----------------------------------------------------------------------------------


def runs_of(user) -> QuerySet[Run]:
    """The user's runs with program and dataset, newest first."""
    return Run.objects.filter(owner=user).select_related("program", "dataset").order_by("-created")


def owned_run(user, pk: int) -> Run:
    """The user's run ``pk`` with program, version and dataset; Http404 otherwise."""
    return get_object_or_404(
        Run.objects.select_related("program", "program_version", "dataset"), pk=pk, owner=user
    )


def owned_runs(user, ids) -> list[Run]:
    """The user's runs among ``ids`` (others' and unknown ids silently left out), by id."""
    wanted = [int(pk) for pk in ids if str(pk).isdigit()]
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
    if optimizer in OPTIMIZERS:
        runs = runs.filter(config__optimizer__name=optimizer)
        applied["optimizer"] = optimizer
    for key in ("program", "dataset"):
        value = params.get(key, "")
        if value.isdigit():
            runs = runs.filter(**{f"{key}_id": int(value)})
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
        .select_related("program", "dataset")
        .prefetch_related("epoch_logs", "evaluations")
        .order_by("pk")
    )


def compare_choices(user) -> QuerySet[Run]:
    """The runs the compare page offers to pick from (the model's ordering, capped)."""
    return Run.objects.filter(owner=user).select_related("program", "dataset")[:COMPARE_CHOICES]


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
