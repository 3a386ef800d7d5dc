"""Section: one part of the run page, and everything the page and its live stream need of it.

Why one object: the page draws a part, the live stream re-renders it when the run changes,
the throttle spaces its sends and the renderer picks its thread; each reads the part's own
entry, so a new part is its template and its entry (``registry.SECTIONS``), nothing else.

Example:

    Section(
        "epochs",
        contexts.history,
        changed_by=("epoch_end",),
        group="overview",
        title="Epochs",
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The frame of a section that names none: a card with its title as heading.
CARD = "training/partials/run_section_card.html"

Context = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Section:
    """One live part of the run page.

    Args:
        name: the part's name (what ``live.render_parts`` takes); its template is
            ``training/partials/run_<name>.html`` unless ``template`` says otherwise.
        context: ``context(run, query) -> dict``: what its template draws from, read afresh
            at each render (``query``: the page's query string; ``{}`` for a live update).
            Sections that name the same function share one call per render.
        changed_by: the event kinds (``training.execution.events``: an engine event's type,
            ``status``, ``phase``, ``evaluation``, ``hand_candidate``) after which it is sent
            again; every section is sent after ``any`` (a finish, a failure).
        group: the page's part it sits in (``registry.GROUPS``: the sections outline's
            anchors), in the registry's order.
        title: the heading of its card (the default frame).
        frame: the page's template around it (its card, heading or fold); sections that
            share a frame other than the card (the overview card holds the status, the
            actions and the progress) are drawn by it once, where the first of them sits.
        template: its fragment's template: an element whose id the live stream swaps, with
            ``hx-swap-oob`` when ``oob`` is true.
        deferred: its frame loads it once the page is up (``hx-get``), so the page's own
            render never waits on it, and its context is never merged into the page's.
        at_most_every: the least seconds between two sends of it caused by events (0: each
            event that changes it sends it); a change that comes sooner is owed, and sent by
            the next event once the time has passed, or by one of ``catch_up_on``.
        catch_up_on: event kinds that send it whenever a change is owed.
        heavy: rendered on the renderer's second thread and at most every few seconds
            (``live_renderer``): it re-reads every candidate.
    """

    name: str
    context: Context
    changed_by: tuple[str, ...]
    group: str
    title: str = ""
    frame: str = CARD
    template: str = ""
    deferred: bool = False
    at_most_every: float = 0.0
    catch_up_on: tuple[str, ...] = ()
    heavy: bool = False

    def __post_init__(self) -> None:
        if not self.template:
            object.__setattr__(self, "template", f"training/partials/run_{self.name}.html")
