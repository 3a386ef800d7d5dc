"""Reads of programs: every query a page makes about programs and their versions, scoped to
the user who asks (runs' reads are ``training.runs.selectors``).

Views never touch the ORM; they call these (reads) or the services of their room (writes).
Each getter filters by owner, so another user's program is a 404 exactly like one that does
not exist. Querysets come back lazy, with the joins their pages need.

Example:

    program = selectors.owned_program(request.user, pk)   # Http404 if not the user's
    versions = selectors.versions_of(program)
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from training.models import (
    Program,
    ProgramVersion,
    Run,
    ServedCall,
)
from training.programs import programs

PROGRAM_RUNS_SHOWN = 20


def new_program_name(user) -> str:
    """The name the program form starts with: "Program N", N one past the user's programs
    (the next free one), so a new program never opens nameless."""
    taken = set(programs_of(user).values_list("name", flat=True))
    number = len(taken) + 1
    while f"Program {number}" in taken:
        number += 1
    return f"Program {number}"


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


def version_or_latest(program: Program, number) -> ProgramVersion | None:
    """The version a launch trains and a served call answers with: version ``number`` of
    ``program``, its latest when ``number`` is None."""
    if number is None:
        return latest_version(program)
    return version_of(program, number)


def latest_version(program: Program) -> ProgramVersion | None:
    """The program's highest-numbered version (None only for a program never saved)."""
    return program.versions.order_by("-number").first()


def answers_labels(program_id) -> bool:
    """Whether program ``program_id`` (a caller already checked it is the user's) answers a
    label set (``programs.answers_labels``); False for none or one that cannot be read here."""
    program = Program.objects.filter(pk=program_id).first() if program_id else None
    if program is None:
        return False
    try:
        return programs.answers_labels(programs.program_from_json(program.engine_json))
    except programs.ProgramError:
        return False


def served_traffic(program: Program, days: int = 7) -> dict[str, Any]:
    """What the program page shows of the requests its served versions answered in the last
    ``days``: how many, how many failed, the median seconds and the latest five."""
    since = timezone.now() - timedelta(days=days)
    calls = ServedCall.objects.filter(program=program, created__gte=since)
    counts = calls.aggregate(total=Count("pk"), failed=Count("pk", filter=~Q(error="")))
    seconds = sorted(calls.values_list("seconds", flat=True)[:1000])
    return {
        "days": days,
        "total": counts["total"],
        "failed": counts["failed"],
        "median_seconds": seconds[len(seconds) // 2] if seconds else None,
        "recent": [
            {
                "created": call.created,
                "answer": json.dumps(call.outputs, ensure_ascii=False),
                "error": call.error,
                "seconds": call.seconds,
                "lm_calls": call.lm_calls,
                "version": call.version,
                "token_name": call.token_name,
            }
            for call in calls[:5]
        ],
    }
