"""Reads of the training app: every query a page makes, scoped to the user who asks.

Views never touch the ORM; they call these (reads) or ``training.services`` (writes). Each
getter filters by owner, so another user's program, run or candidate is a 404 exactly like
one that does not exist. Querysets come back lazy, with the joins their pages need.

Example:

    run = selectors.owned_run(request.user, pk)        # Http404 if not the user's
    recent = selectors.runs_of(request.user)[:5]
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from training.models import Candidate, EpochLog, Evaluation, Program, Run

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
    return program.runs.select_related("dataset").order_by("-created")[:limit]


# --- runs ----------------------------------------------------------------------------------


def runs_of(user) -> QuerySet[Run]:
    """The user's runs with program and dataset, newest first."""
    return Run.objects.filter(owner=user).select_related("program", "dataset").order_by("-created")


def owned_run(user, pk: int) -> Run:
    """The user's run ``pk`` with program and dataset; Http404 otherwise."""
    return get_object_or_404(Run.objects.select_related("program", "dataset"), pk=pk, owner=user)


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
