"""What a candidate's page shows: its value laid out, and a line diff against each parent.

A candidate is one value an optimizer proposed for a trainable variable (instructions and
few-shot examples). Its page answers "what changed?": the value is turned into diffable
text (instructions as prose, each example as one JSON line, anything else as indented
JSON) and diffed against every stored parent, so a crossover shows what it took from each.

Example:

    context = candidate_diff.describe(candidate)
    context["diffs"][0]["lines"]   # [("diff-file", "--- c1 (parent)"), ...]
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from training.models import Candidate

LAID_OUT_KEYS = ("instructions", "examples")


def describe(candidate: Candidate) -> dict[str, Any]:
    """The candidate page's context (less the run): parents, diffs and the laid-out value.

    Returns:
        ``parent`` (the first parent or None), ``parents``, ``diffs`` (one
        ``{"parent", "lines"}`` per parent, lines as ``(css class, text)``),
        ``instructions``, ``examples`` (inputs/outputs as indented JSON) and ``other``
        (the value's remaining keys).
    """
    parents = candidate.parents()
    value = candidate.value or {}
    return {
        "candidate": candidate,
        "parent": parents[0] if parents else None,
        "parents": parents,
        "diffs": [{"parent": parent, "lines": diff(parent, candidate)} for parent in parents],
        "instructions": value.get("instructions", ""),
        "examples": [
            {
                "inputs": json.dumps(ex.get("inputs"), indent=2, ensure_ascii=False),
                "outputs": json.dumps(ex.get("outputs"), indent=2, ensure_ascii=False),
            }
            for ex in value.get("examples", [])
            if isinstance(ex, dict)
        ],
        "other": {k: v for k, v in value.items() if k not in LAID_OUT_KEYS},
    }


def diff(parent: Candidate, candidate: Candidate) -> list[tuple[str, str]]:
    """A unified diff from ``parent`` to ``candidate``, each line with its CSS class."""
    return diff_values(
        parent.value,
        candidate.value,
        fromfile=f"{parent.candidate_id} (parent)",
        tofile=candidate.candidate_id,
    )


def diff_values(old, new, fromfile: str, tofile: str) -> list[tuple[str, str]]:
    """A unified diff between two variable values (``as_text``), each line with its CSS class;
    also what a program page's version diff shows (``program_versions.compare``)."""
    return [
        (_diff_class(line), line)
        for line in difflib.unified_diff(
            as_text(old).splitlines(),
            as_text(new).splitlines(),
            fromfile=fromfile,
            tofile=tofile,
            lineterm="",
        )
    ]


def as_text(value) -> str:
    """A candidate's value as diffable text: instructions as prose, examples as JSON."""
    value = value or {}
    lines = ["instructions:", *(value.get("instructions") or "").splitlines(), "", "examples:"]
    for example in value.get("examples", []) or []:
        lines.append(json.dumps(example, ensure_ascii=False, sort_keys=True))
    for key, item in value.items():
        if key not in LAID_OUT_KEYS:
            lines += ["", f"{key}:", json.dumps(item, ensure_ascii=False, sort_keys=True, indent=1)]
    return "\n".join(lines)


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    if line.startswith("+"):
        return "diff-add"
    if line.startswith("-"):
        return "diff-del"
    return "diff-same"
