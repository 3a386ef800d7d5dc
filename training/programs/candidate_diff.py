"""What a candidate's page shows: its value laid out, and a line diff against each parent.

A candidate is one value an optimizer proposed for a trainable variable (instructions and
few-shot examples). Its page answers "what changed?": the value is turned into diffable
text (instructions as prose, each example as one JSON line, anything else as indented
JSON) and diffed against every stored parent, so a crossover shows what it took from each.

A NearestFewShot pool (``retrieval``: hundreds of examples, each with a base64 vector) is
never shown raw: its page shows a summary (size, ``k``, ``vote``, embedding model, the
outputs' counts, the first :data:`POOL_ROWS_SHOWN` examples clipped) and its diff text one
line of settings and one line per pooled example, without vectors, up to
:data:`POOL_ROWS_DIFFED`.

Example:

    context = candidate_diff.describe(candidate)
    context["diffs"][0]["lines"]   # [("diff-file", "--- c1 (parent)"), ...]
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from typing import Any

from training.models import Candidate

LAID_OUT_KEYS = ("instructions", "examples", "retrieval", "decision")
#: Pooled examples listed on the candidate page (the rest are counted).
POOL_ROWS_SHOWN = 5
#: Pooled examples in the diff text (one line each; the rest are counted).
POOL_ROWS_DIFFED = 50
#: Characters of a pooled example's inputs or outputs shown (JSON text).
POOL_TEXT_CHARS = 300
#: Distinct outputs counted in the summary (a label set has a few; free text is not counted).
POOL_OUTPUTS_COUNTED = 12


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
        "retrieval": retrieval_summary(value.get("retrieval")),
        "decision": decision_summary(value.get("decision")),
        "other": {k: v for k, v in value.items() if k not in LAID_OUT_KEYS},
    }


def _clipped_json(item: Any) -> str:
    text = json.dumps(item, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= POOL_TEXT_CHARS else text[: POOL_TEXT_CHARS - 1] + "…"


def retrieval_summary(retrieval: Any) -> dict[str, Any] | None:
    """What a candidate page shows of a NearestFewShot pool (never its vectors): ``size``,
    ``k``, ``vote``, ``embedding_model``, ``outputs`` ([(answer, count)] when few distinct
    answers, else []), ``rows`` (the first pooled examples, inputs/outputs as clipped JSON)
    and ``more`` (pooled examples not listed). None when the value has no pool."""
    if not isinstance(retrieval, dict):
        return None
    pool = [e for e in retrieval.get("pool") or [] if isinstance(e, dict)]
    answers = Counter(_clipped_json(e.get("outputs")) for e in pool)
    return {
        "size": len(pool),
        "k": retrieval.get("k"),
        "vote": bool(retrieval.get("vote")),
        "in_prompt": retrieval.get("in_prompt", True) is not False,
        "embedding_model": str(retrieval.get("embedding_model") or ""),
        "outputs": answers.most_common() if len(answers) <= POOL_OUTPUTS_COUNTED else [],
        "rows": [
            {"inputs": _clipped_json(e.get("inputs")), "outputs": _clipped_json(e.get("outputs"))}
            for e in pool[:POOL_ROWS_SHOWN]
        ],
        "more": max(0, len(pool) - POOL_ROWS_SHOWN),
    }


def decision_summary(decision: Any) -> dict[str, Any] | None:
    """What a candidate page shows of a label ``decision`` (CalibratedLabels): the field, the
    weights of the LM's scores, the neighbours' vote and the embedding read-out (its vectors
    are not shown), and each label's bias; one line of
    text (``text``) is also what the diff shows. None when the value has none."""
    if not isinstance(decision, dict):
        return None
    bias = decision.get("bias") if isinstance(decision.get("bias"), dict) else {}
    numbers = {k: v for k, v in bias.items() if isinstance(v, int | float)}
    lm, vote = decision.get("lm_weight"), decision.get("vote_weight")
    parts = [f"LM scores × {lm:g}" if isinstance(lm, int | float) else "LM scores"]
    if isinstance(vote, int | float) and vote:
        parts.append(f"the nearest examples' vote × {vote:g}")
    readout = decision.get("readout_weight")
    if isinstance(readout, int | float) and readout and decision.get("readout"):
        parts.append(f"the embedding read-out × {readout:g}")
    biases = ", ".join(f"{label} {value:+.2f}" for label, value in numbers.items())
    return {
        "field": str(decision.get("field") or ""),
        "lm_weight": lm,
        "vote_weight": vote,
        "bias": numbers,
        "text": f"{decision.get('field')}: " + " + ".join(parts) + f" + bias ({biases})",
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
    retrieval = retrieval_summary(value.get("retrieval"))
    if retrieval is not None:
        lines += ["", "retrieval:", _retrieval_settings(retrieval)]
        pool = [e for e in value["retrieval"].get("pool") or [] if isinstance(e, dict)]
        for example in pool[:POOL_ROWS_DIFFED]:
            lines.append(
                _clipped_json({"inputs": example.get("inputs"), "outputs": example.get("outputs")})
            )
        if len(pool) > POOL_ROWS_DIFFED:
            lines.append(f"... and {len(pool) - POOL_ROWS_DIFFED} more pooled examples")
    decision = decision_summary(value.get("decision"))
    if decision is not None:
        lines += ["", "decision:", decision["text"]]
    for key, item in value.items():
        if key not in LAID_OUT_KEYS:
            lines += ["", f"{key}:", json.dumps(item, ensure_ascii=False, sort_keys=True, indent=1)]
    return "\n".join(lines)


def _retrieval_settings(summary: dict[str, Any]) -> str:
    model = summary["embedding_model"] or "its embedding model"
    if not summary["in_prompt"]:
        return (
            f"{summary['k']} nearest of {summary['size']} pooled examples by {model} vote in "
            "the decision (not in the prompt)"
        )
    vote = "with the neighbours' vote" if summary["vote"] else "no vote"
    return f"{summary['k']} nearest of {summary['size']} pooled examples by {model}, {vote}"


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
