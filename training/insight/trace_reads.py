"""Reads behind the LM call trace pages: filtered trace lists, error groups, every candidate.

Each function takes a run the caller already checked belongs to the user (views use
``owned_run``), so nothing here can reach another user's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet, Sum

from core.ids import whole_number
from training.engine.language_models.tracing import ROLES
from training.models import LMCallTrace, Run
from training.query_filters import one_of
from training.runs import selectors as candidate_selectors

TRACES_PER_PAGE = 50
CANDIDATES_PER_PAGE = 50
ERROR_GROUPS_SHOWN = 20
SPLITS = ("train", "validation", "test")
PHASES = ("before", "after", "samples")
#: Fields a trace list never needs (the detail page shows them).
HEAVY_FIELDS = ("messages", "parsed")


@dataclass
class TraceFilters:
    """What a trace list shows, read from its query string (``?role=judge&failed=1``).

    A value that cannot be used (an unknown role, an example that is not a number) is left
    out and said in ``problems``: the list still shows, unfiltered on that field.
    """

    role: str = ""
    candidate: str = ""
    failed: bool = False
    split: str = ""
    example: int | None = None
    phase: str = ""
    error: str = ""
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: Any) -> TraceFilters:
        filters = cls()
        problems = filters.problems
        filters.role = one_of(query, "role", ROLES, problems)
        filters.candidate = query.get("candidate", "").strip()[:64]
        filters.failed = query.get("failed", "") in ("1", "true", "on")
        filters.split = one_of(query, "split", SPLITS, problems)
        example = query.get("example", "").strip()
        if example:
            filters.example = whole_number(example, 9)
            if filters.example is None:
                problems.append(f"example {example[:20]!r} is not a whole number")
        filters.phase = one_of(query, "phase", PHASES, problems)
        filters.error = query.get("error", "")[:10_000]
        return filters

    def apply(self, traces: QuerySet) -> QuerySet:
        if self.role:
            traces = traces.filter(role=self.role)
        if self.candidate:
            traces = traces.filter(candidate_id=self.candidate)
        if self.failed:
            traces = traces.filter(failed=True)
        if self.split:
            traces = traces.filter(split=self.split)
        if self.example is not None:
            traces = traces.filter(example_index=self.example)
        if self.phase:
            traces = traces.filter(phase=self.phase)
        if self.error:
            traces = traces.filter(error=self.error)
        return traces

    def as_query(self, **changes: Any) -> str:
        """The query string of these filters with ``changes`` (None or "" removes one)."""
        values = {
            "role": self.role,
            "candidate": self.candidate,
            "failed": "1" if self.failed else "",
            "split": self.split,
            "example": "" if self.example is None else str(self.example),
            "phase": self.phase,
            "error": self.error,
        }
        values.update({key: "" if value is None else str(value) for key, value in changes.items()})
        return urlencode({key: value for key, value in values.items() if value})

    @property
    def active(self) -> bool:
        return bool(self.as_query())


def trace_page(run: Run, filters: TraceFilters, page: Any) -> Page:
    """One page of the run's traces that match ``filters``, in call order."""
    traces = filters.apply(LMCallTrace.objects.filter(run=run)).defer(*HEAVY_FIELDS)
    return Paginator(traces.order_by("seq", "id"), TRACES_PER_PAGE).get_page(page)


def trace_detail(run: Run, trace_pk: int) -> LMCallTrace | None:
    return LMCallTrace.objects.filter(run=run, pk=trace_pk).first()


def neighbours(trace: LMCallTrace) -> tuple[int | None, int | None]:
    """The previous and next calls of the run (primary keys)."""
    calls = LMCallTrace.objects.filter(run_id=trace.run_id)
    previous = calls.filter(seq__lt=trace.seq).order_by("-seq").values_list("pk", flat=True)
    following = calls.filter(seq__gt=trace.seq).order_by("seq").values_list("pk", flat=True)
    return previous.first(), following.first()


def trace_summary(run: Run) -> dict[str, Any]:
    """What the run page's "LM calls and errors" panel shows: how many calls were traced
    (by role), how many failed, and the failed calls grouped by message, most frequent first.

    A call is counted as the usage counts it (``Usage.calls``): each provider request of a
    completion (a trace's ``attempts``, retries included; a memo or cache answer is none),
    so on every read the traced total is the page's "LM calls" (the two are written in one
    transaction, ``training.execution.recording.traces``) unless the trace cap dropped some."""
    traces = LMCallTrace.objects.filter(run=run).order_by()
    requests = traces.exclude(kind="embedding")
    by_role = dict(
        requests.values("role").annotate(count=Sum("attempts")).values_list("role", "count")
    )
    groups = list(
        traces.filter(failed=True)
        .values("error")
        .annotate(count=Count("id"))
        .order_by("-count", "error")[: ERROR_GROUPS_SHOWN + 1]
    )
    for group in groups:
        group["query"] = TraceFilters(failed=True, error=group["error"]).as_query()
    failed = traces.filter(failed=True).count()
    answered = traces.filter(Q(memo_hit=True) | Q(cache_hit=True)).count()
    return {
        "trace_answered": answered,
        "trace_records": traces.count(),
        "trace_total": sum(by_role.values()),
        "trace_roles": [(role, by_role[role]) for role in ROLES if by_role.get(role)],
        "trace_failed": failed,
        "error_groups": groups[:ERROR_GROUPS_SHOWN],
        "error_groups_more": len(groups) > ERROR_GROUPS_SHOWN,
        "traces_dropped": run.traces_dropped,
    }


def candidate_trace_counts(run: Run, candidate_id: str) -> dict[str, int]:
    """How many validation predictions (and of them failed) a candidate was scored on."""
    traces = LMCallTrace.objects.filter(run=run, candidate_id=candidate_id, role="prediction")
    return {"predictions": traces.count(), "failed": traces.filter(failed=True).count()}


def candidate_page(run: Run, page: Any) -> Page:
    """Every candidate of the run, best first, one page at a time (with parent links)."""
    candidates = run.candidates.order_by(F("reward").desc(nulls_last=True), "epoch", "id")
    result = Paginator(candidates, CANDIDATES_PER_PAGE).get_page(page)
    result.object_list = candidate_selectors.with_parent_links(run, list(result.object_list))
    return result
