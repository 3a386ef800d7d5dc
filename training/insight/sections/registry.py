"""The run page's sections, in the page's order: the one list the page, its live stream,
the throttle and the renderer read (``section.Section`` says what each field does).

To add a section: its template (``training/partials/run_<name>.html``: an element with an
id, ``hx-swap-oob`` when ``oob``) and its entry here; a context that is not one of
``contexts`` can be a function beside it. Nothing else names a section: the worker says what
happened (``training.execution.events``), and the entries say what that changes.

Example:

    >>> [section.name for section in changed_by({"epoch_end"})][:3]
    ['progress', 'chart', 'epochs']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from training.execution import events
from training.insight.sections import contexts
from training.insight.sections.section import CARD, Section

#: The page's parts, as its sections outline (``run_sections_nav.html``) links them.
GROUPS = ("overview", "examples", "candidates", "spend", "steer")

OVERVIEW = "training/partials/run_overview_card.html"  # status, actions and progress
HISTORY = "training/partials/run_history_cards.html"  # the chart beside the test split

SECTIONS: tuple[Section, ...] = (
    Section(
        "status",
        contexts.status,
        changed_by=("train_begin", "evaluation", "status", "phase"),
        group="overview",
        frame=OVERVIEW,
    ),
    Section("actions", contexts.nothing, changed_by=("status",), group="overview", frame=OVERVIEW),
    Section(
        "progress",
        contexts.progress,
        changed_by=("train_begin", "batch_end", "epoch_end", "paused", "status", "phase"),
        group="overview",
        frame=OVERVIEW,
    ),
    Section(
        "chart",
        contexts.history,
        changed_by=("batch_end", "epoch_end", "status"),
        group="overview",
        frame=HISTORY,
    ),
    Section(
        "evaluations",
        contexts.evaluations,
        changed_by=("evaluation",),
        group="overview",
        frame=HISTORY,
    ),
    Section(
        "epochs", contexts.history, changed_by=("epoch_end",), group="overview", title="Epochs"
    ),
    Section(
        "examples",
        contexts.examples,
        changed_by=("evaluation",),
        group="examples",
        frame="training/partials/run_examples.html",  # a card of its own
    ),
    Section(
        "leaderboard",
        contexts.leaderboard,
        # Not the epoch end: candidate and selection events send it (the throttled sections
        # a candidate event still owes come with the next epoch end).
        changed_by=(
            "candidate",
            "optimizer_error",
            "candidate_refused",
            "selection",
            "final_selection",
            "hand_candidate",
        ),
        group="candidates",
        title="Candidates",
        heavy=True,
    ),
    # The map, the tree and the Selection section re-read every candidate (embeddings
    # included; the bootstrap intervals): an optimizer can store a candidate every batch, and
    # re-sending them for each (tens of kilobytes) kept the page's socket and the browser busy
    # for nothing a person can follow; sending them at every epoch end, changed or not, made
    # each epoch render ~100 ms more (``bench/stream_latency.py``).
    Section(
        "candidate_confidence",
        contexts.selection,
        changed_by=("candidate", "selection", "final_selection"),
        group="candidates",
        frame="training/partials/selection_section.html",
        deferred=True,  # its bootstraps take a moment on a large run
        # read rather than followed: an epoch end does not force it (p95 ~40 ms higher when
        # every epoch sent it); the final selection always does
        at_most_every=15.0,
        catch_up_on=("final_selection",),
        heavy=True,
    ),
    Section(
        "population",
        contexts.population,
        changed_by=("candidate",),
        group="candidates",
        frame="training/partials/population_section.html",
        at_most_every=5.0,
        catch_up_on=("epoch_end",),
        heavy=True,
    ),
    Section(
        "lineage",
        contexts.run_lineage,
        changed_by=("candidate",),
        group="candidates",
        frame="training/partials/lineage_section.html",
        at_most_every=5.0,
        catch_up_on=("epoch_end",),
        heavy=True,
    ),
    # The forecast's "actual so far", the usage and the traced calls are one count (stored
    # together: ``traces``): sent by the same events, never apart.
    Section(
        "forecast",
        contexts.nothing,
        changed_by=("batch_end", "epoch_end", "evaluation"),
        group="spend",
        title="Forecast and budget",
    ),
    Section(
        "usage",
        contexts.nothing,
        changed_by=("batch_end", "epoch_end", "evaluation"),
        group="spend",
        title="LM usage",
    ),
    Section(
        "spend",
        contexts.run_spend,
        changed_by=("batch_end", "epoch_end", "evaluation"),
        group="spend",
        frame="training/partials/spend_section.html",
    ),
    Section(
        "traces",
        contexts.traces,
        changed_by=("batch_end", "epoch_end", "evaluation"),
        group="spend",
        title="LM calls and errors",
    ),
)


def names() -> tuple[str, ...]:
    return tuple(section.name for section in SECTIONS)


def named(called: Iterable[str]) -> list[Section]:
    """The sections ``called``, in the page's order (KeyError for an unknown name)."""
    wanted = set(called)
    found = [section for section in SECTIONS if section.name in wanted]
    if len(found) != len(wanted):
        unknown = wanted - {section.name for section in found}
        raise KeyError(f"no run-page section {', '.join(sorted(unknown))}")
    return found


def changed_by(kinds: Iterable[str]) -> list[Section]:
    """The sections an event of one of ``kinds`` changes, in the page's order."""
    kinds = set(kinds)
    if events.ANY in kinds:  # a finish, a failure: everything may have changed
        return list(SECTIONS)
    return [section for section in SECTIONS if kinds.intersection(section.changed_by)]


@dataclass(frozen=True)
class Frame:
    """One frame of the page and the section it is drawn for (the first that names it)."""

    template: str
    section: Section


def page() -> dict[str, list[Frame]]:
    """{group: the frames it draws, in order}: what ``run_detail.html`` iterates."""
    groups: dict[str, list[Frame]] = {group: [] for group in GROUPS}
    drawn: set[str] = set()
    for section in SECTIONS:
        if section.frame != CARD and section.frame in drawn:
            continue
        drawn.add(section.frame)
        groups[section.group].append(Frame(section.frame, section))
    return groups
