"""What each compared run learned: its best candidate per trainable variable, side by side.

The compare page shows, for every variable the runs trained, each run's best candidate (the
one the optimizer marked ``best``, else the highest reward): its instructions and few-shot
examples, with what differs marked. A word of an instruction is marked when it is not in
the first run's (for the first run: when another run lacks it); an example is marked when
not every run has it. Marking is done here on plain text; the template prints each piece
autoescaped (instructions and examples came from an LM or a user).
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from django.db.models import F

from training.models import Candidate, Run
from training.programs.candidate_diff import retrieval_summary

_TOKEN = re.compile(r"\w+|[^\w\s]+|\s+")
#: Examples shown per run and variable (the rest are counted).
MAX_EXAMPLES = 20
MAX_EXAMPLE_CHARS = 600


def best_candidates(runs: list[Run]) -> dict[int, dict[str, Candidate]]:
    """``{run pk: {variable: best candidate}}`` in one query."""
    found: dict[int, dict[str, Candidate]] = {run.pk: {} for run in runs}
    candidates = Candidate.objects.filter(run__in=runs).order_by(
        "run_id", "variable", F("reward").desc(nulls_last=True), "epoch", "id"
    )
    for candidate in candidates:
        chosen = found[candidate.run_id].get(candidate.variable)
        if chosen is None or (candidate.status == "best" and chosen.status != "best"):
            found[candidate.run_id][candidate.variable] = candidate
    return found


def compare_learned(runs: list[Run]) -> list[dict[str, Any]]:
    """One entry per variable: ``{"variable", "columns"}``, a column per run with
    ``run``, ``candidate`` (or None), ``instructions`` (``[(text, changed)]`` tokens),
    ``examples`` (``[(text, changed)]``), ``more_examples``, ``retrieval`` (the pool's
    summary, ``candidate_diff.retrieval_summary``, or None) and ``differs`` (anything
    differs from the other runs)."""
    best = best_candidates(runs)
    variables: list[str] = []
    for run in runs:
        for name in best[run.pk]:
            if name not in variables:
                variables.append(name)
    result = []
    for name in variables:
        chosen = [best[run.pk].get(name) for run in runs]
        values = [(c.value or {}) if c is not None else None for c in chosen]
        instructions = [_instructions(v) for v in values]
        examples = [_examples(v) for v in values]
        marked_instructions = mark_words(instructions)
        present = [set(items) for items, value in zip(examples, values, strict=True) if value]
        shared = set.intersection(*present) if present else set()
        columns = []
        for run, candidate, value, words, items in zip(
            runs, chosen, values, marked_instructions, examples, strict=True
        ):
            columns.append(
                {
                    "run": run,
                    "candidate": candidate,
                    "instructions": words,
                    "examples": [(text, text not in shared) for text in items[:MAX_EXAMPLES]],
                    "more_examples": max(0, len(items) - MAX_EXAMPLES),
                    "has_value": value is not None,
                    # a retrieval program's examples are its pool, per input
                    "retrieval": retrieval_summary((value or {}).get("retrieval")),
                    "differs": any(changed for _, changed in words)
                    or any(text not in shared for text in items),
                }
            )
        result.append({"variable": name, "columns": columns})
    return result


def _instructions(value: dict | None) -> str:
    if not value:
        return ""
    text = value.get("instructions")
    return text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)


def _examples(value: dict | None) -> list[str]:
    """Each few-shot example as one line of JSON (inputs → outputs), cut to a bound."""
    if not value:
        return []
    lines = []
    for example in value.get("examples") or []:
        if isinstance(example, dict) and ("inputs" in example or "outputs" in example):
            text = (
                f"{json.dumps(example.get('inputs'), ensure_ascii=False, sort_keys=True)} → "
                f"{json.dumps(example.get('outputs'), ensure_ascii=False, sort_keys=True)}"
            )
        else:
            text = json.dumps(example, ensure_ascii=False, sort_keys=True)
        if len(text) > MAX_EXAMPLE_CHARS:
            text = f"{text[:MAX_EXAMPLE_CHARS]}… [{len(text) - MAX_EXAMPLE_CHARS} more characters]"
        lines.append(text)
    return lines


def mark_words(texts: list[str]) -> list[list[tuple[str, bool]]]:
    """Each text as ``(piece, changed)`` pieces (words, punctuation and spaces).

    A word of text k > 0 is changed when it is not matched in the first text; a word of the
    first text is changed when some other text does not match it. Neighbouring pieces with
    the same mark are joined.

    Example:
        >>> mark_words(["a b", "a c d"])
        [[('a ', False), ('b', True)], [('a ', False), ('c d', True)]]
    """
    tokens = [_TOKEN.findall(text) for text in texts]
    if not tokens:
        return []
    base = tokens[0]
    base_changed = [False] * len(base)
    marked: list[list[tuple[str, bool]]] = [[]]
    for other in tokens[1:]:
        changed = [False] * len(other)
        matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for j in range(j1, j2):
                changed[j] = not other[j].isspace()
            for i in range(i1, i2):
                base_changed[i] = base_changed[i] or not base[i].isspace()
        marked.append(_joined(other, changed))
    marked[0] = _joined(base, base_changed)
    return marked


def _joined(tokens: list[str], changed: list[bool]) -> list[tuple[str, bool]]:
    """Neighbouring pieces with the same mark as one (the spaces between two changed words
    changed too): one ``<mark>`` per changed stretch."""
    pieces: list[tuple[str, bool]] = []
    for i, (token, flag) in enumerate(zip(tokens, changed, strict=True)):
        if token.isspace() and 0 < i < len(tokens) - 1 and changed[i - 1] and changed[i + 1]:
            flag = True
        if pieces and pieces[-1][1] == flag:
            pieces[-1] = (pieces[-1][0] + token, flag)
        else:
            pieces.append((token, flag))
    return pieces
