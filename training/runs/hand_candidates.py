"""Your own candidate in a live population: on a running or paused OMEGA or
RandomFewShot run, a person starts from any of its candidates, edits the instructions and
the few-shot examples (keeps, removes or rewrites each, adds one: inputs and outputs as JSON
checked against the program's data models, ``example_edits``; applied as when branching:
``branching.edited_value``), sees the diff, and adds it. The candidate waits as a ``HandCandidate`` row until the worker's next batch end
(``execution.recording.persistence``), which hands it to the optimizer
(``Optimizer.add_by_hand``): it is scored at the optimizer's next scoring step and from then on treated as any other, shown
with operation ``by_hand`` ("by hand") in the leaderboard and the lineage.

Example:

    entry = hand_candidates.submit(run, candidate, Edits(instructions="Route by keyword."))
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from core.bounded_json import refuse_constant
from training import optimizer_registry
from training.engine.optimizers.optimizer import MAX_BY_HAND_CHARS, by_hand_size
from training.execution import events
from training.execution.hand_candidates import QUEUED
from training.models import Candidate, HandCandidate, Run
from training.runs import example_edits
from training.runs.branching import BranchError, Edits, edited_value

#: Candidates by hand one run may hold (queued and added together).
MAX_PER_RUN = 20


class HandCandidateError(ValueError):
    """A candidate that cannot be added; the message says why, for the person who asked."""


def accepts(run: Run) -> bool:
    """Whether ``run``'s population can take a candidate by hand now."""
    return (
        run.takes_candidates_by_hand
        and run.status in (*Run.ACTIVE, Run.PAUSED)
        and run.source != Run.CODE  # its optimizer runs in that code, out of the queue's reach
    )


def preview(candidate: Candidate, edits: Edits) -> dict[str, Any]:
    """The edited value, or HandCandidateError (the branch rules, said in the same words; a
    value longer than the engine takes by hand, ``MAX_BY_HAND_CHARS``)."""
    try:
        value, _ = edited_value(candidate, edits)
    except BranchError as exc:
        raise HandCandidateError(str(exc)) from None
    if value == (candidate.value or {}):
        raise HandCandidateError("That is the candidate as it is: change something first.")
    size = by_hand_size(value)
    if size > MAX_BY_HAND_CHARS:
        raise HandCandidateError(
            f"A candidate by hand holds at most {MAX_BY_HAND_CHARS} characters as JSON, "
            f"this one {size}: remove an example or shorten one."
        )
    return value


def example_texts(candidate: Candidate, data: Any) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Each example's inputs and outputs as the form holds them (``data``: its POST, or {}:
    the candidate's own as JSON), and the new example's."""
    texts = [
        {
            part: data.get(f"example_{i}_{part}", example_edits.as_text(example.get(part)))
            for part in ("inputs", "outputs")
        }
        for i, example in enumerate((candidate.value or {}).get("examples") or [])
    ]
    return texts, {part: data.get(f"new_{part}", "") for part in ("inputs", "outputs")}


def read_edits(run: Run, candidate: Candidate, data: Any) -> Edits:
    """The form's edits of ``candidate`` (``data``: its POST): the instructions, each example
    kept, removed or written anew (``example_<i>_inputs`` / ``_outputs`` as JSON), one new
    example (``new_inputs`` / ``new_outputs``, when filled). HandCandidateError names an
    example that does not fit the program's data models (``example_edits``)."""
    examples = list((candidate.value or {}).get("examples") or [])
    texts, new = example_texts(candidate, data)
    edits = Edits(
        instructions=data.get("branch_instructions"),
        examples=["remove" if data.get(f"remove_{i}") else "keep" for i in range(len(examples))],
    )
    changed = [
        i
        for i, (example, typed) in enumerate(zip(examples, texts, strict=True))
        if edits.examples[i] != "remove"
        and (_loads(typed["inputs"]), _loads(typed["outputs"]))
        != (example.get("inputs"), example.get("outputs"))
    ]
    if not changed and not (new["inputs"].strip() or new["outputs"].strip()):
        return edits
    try:
        models = example_edits.example_models(run, candidate.variable)
        for i in changed:
            edits.edited[i] = example_edits.parse_example(
                texts[i]["inputs"], texts[i]["outputs"], models, f"Example {i + 1}"
            )
        if new["inputs"].strip() or new["outputs"].strip():
            edits.added.append(
                example_edits.parse_example(
                    new["inputs"], new["outputs"], models, "The new example"
                )
            )
    except example_edits.ExampleError as exc:
        raise HandCandidateError(str(exc)) from None
    return edits


def _loads(text: str) -> Any:
    """The text's JSON when it reads as such (else the text: then it is a change)."""
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        return text


def submit(run: Run, candidate: Candidate, edits: Edits) -> HandCandidate:
    """Queue the edited candidate for the run's live population; the row queued."""
    if not accepts(run):
        raise HandCandidateError(
            "Only a queued, running or paused run whose optimizer takes candidates by hand ("
            + ", ".join(
                n for n in optimizer_registry.names() if optimizer_registry.card(n).takes_by_hand
            )
            + ") takes one."
        )
    value = preview(candidate, edits)
    with transaction.atomic():
        # The run row's lock orders two submits: each counts the queue the other left.
        Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()
        count = HandCandidate.objects.filter(run_id=run.pk).count()
        if count >= MAX_PER_RUN:
            raise HandCandidateError(f"A run takes at most {MAX_PER_RUN} candidates by hand.")
        entry = HandCandidate.objects.create(
            run_id=run.pk,
            number=count + 1,
            variable=candidate.variable,
            parent=candidate.candidate_id,
            value=value,
            state=QUEUED,
        )
    run.refresh_from_db()
    events.run_changed(run, events.HAND_CANDIDATE)
    return entry
