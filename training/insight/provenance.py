"""Where each part of the final prompt came from: its sentences and its few-shot examples.

Why: an optimised prompt is a pile of sentences and examples added by mutations, crossovers
and example draws over many steps; a reader who wants to edit it needs to know which step
added a sentence and whether the reward moved when it did (GEPA users ask for this). Every
candidate is stored with its parents (``Candidate.parent_ids``) and value, so the lineage
(``training.insight.lineage``) can be walked back from the final candidate.

The rule: a piece (an instruction sentence, or an example by its JSON) was introduced by
the nearest ancestor that has it while none of that ancestor's parents does; from a
candidate whose parents have it, the walk goes on through the first parent that has it
(a crossover's first parent first). The seed's pieces were in the program before training.
The reward change of that step is the candidate's reward minus its first parent's (the one
it was made from), on the same split.

Pure reads over the run's candidates; nothing is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from training.models import Candidate, Run

#: Most pieces listed per variable (a long prompt's first sentences and examples).
MAX_PIECES = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str) -> list[str]:
    """The instruction's sentences, in order, stripped; empty ones dropped."""
    return [piece.strip() for piece in _SENTENCE_END.split(text or "") if piece.strip()]


def _example_key(example: Any) -> str:
    return json.dumps(example, sort_keys=True, ensure_ascii=False, default=str)


def pieces_of(value: dict[str, Any]) -> dict[str, set[str]]:
    """``{"sentence": {...}, "example": {...}}``: what a candidate value holds."""
    return {
        "sentence": set(sentences(str(value.get("instructions") or ""))),
        "example": {_example_key(e) for e in value.get("examples") or []},
    }


@dataclass
class Piece:
    """One part of the final prompt and the step that introduced it."""

    kind: str  # "sentence" or "example"
    text: str
    origin: Candidate
    parent: Candidate | None
    example: Any = None

    @property
    def reward_change(self) -> float | None:
        if self.parent is None or self.origin.reward is None or self.parent.reward is None:
            return None
        return self.origin.reward - self.parent.reward

    @property
    def before_training(self) -> bool:
        return self.origin.operation == "seed" or self.parent is None


def origin(
    kind: str, key: str, start: Candidate, by_id: dict[str, Candidate]
) -> tuple[Candidate, Candidate | None]:
    """(the candidate that introduced ``key``, the parent it was made from) walking back from
    ``start`` (see the module docstring). Cycles and missing parents end the walk."""
    node, seen = start, set()
    while node.candidate_id not in seen:
        seen.add(node.candidate_id)
        parents = [by_id[p] for p in node.parent_ids or [] if p in by_id]
        holding = [p for p in parents if key in pieces_of(p.value or {})[kind]]
        if not holding:
            return node, (parents[0] if parents else None)
        node = holding[0]
    return node, None


def final_candidate(run: Run, variable: str) -> Candidate | None:
    """The candidate the run ended with for ``variable`` (status ``best``), else its best."""
    rows = run.candidates.filter(variable=variable)
    return rows.filter(status="best").first() or rows.exclude(reward=None).first()


def provenance(run: Run) -> list[dict[str, Any]]:
    """Per trained variable: ``{"variable", "final": Candidate, "pieces": [Piece]}``, the
    final value's sentences then its examples, in the prompt's order."""
    result = []
    variables = run.candidates.order_by().values_list("variable", flat=True).distinct()
    for variable in sorted(set(variables)):
        final = final_candidate(run, variable)
        if final is None:
            continue
        by_id = {c.candidate_id: c for c in run.candidates.filter(variable=variable)}
        value = final.value or {}
        pieces = []
        for text in sentences(str(value.get("instructions") or "")):
            found, parent = origin("sentence", text, final, by_id)
            pieces.append(Piece("sentence", text, found, parent))
        for example in value.get("examples") or []:
            found, parent = origin("example", _example_key(example), final, by_id)
            pieces.append(Piece("example", _example_key(example), found, parent, example))
        result.append({"variable": variable, "final": final, "pieces": pieces[:MAX_PIECES]})
    return result
