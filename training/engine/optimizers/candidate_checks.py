"""Junk rules: text an LM mutation or crossover wrote that is refused before it is scored.

Why: on the local 135M model OMEGA's mutations rewrote an instruction into ``", "``, into one
sentence said three times, and into label lists with labels the task does not have; scored,
some were even "kept" (they tied the seed on a small validation set) and then bred more junk.
Scoring one costs a validation pass; refusing it costs nothing and says why. Each rule looks at
one text the LM wrote (a string field of the variable's editable part) and its parents' text:

- ``unchanged``: the same text as a parent (nothing new to score; checked first);
- ``empty``: nothing but whitespace;
- ``punctuation``: no letter or digit at all (``", "``);
- ``shorter``: under :data:`SHORTER_RATIO` of the shortest parent's length (parents of at
  least :data:`MIN_COMPARED_CHARS` characters): a rule set cut to a stub;
- ``repeats``: a sentence of at least :data:`MIN_SENTENCE_WORDS` words said twice, a
  :data:`NGRAM`-word phrase :data:`NGRAM_REPEATS` times within one sentence (a list of rules,
  one sentence each, may open every rule alike), or one word :data:`WORD_RUN` times in a row;
- ``unknown_labels``: on a label task, a list or a quote that names a label of the set next to
  words that are not labels (invented labels the grammar will never let the model answer).

:func:`refusal` applies them in that order and returns the first that fires.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

#: A text shorter than this share of its (shortest) parent is refused (``shorter``).
SHORTER_RATIO = 0.35
#: Parents shorter than this are not compared (a short instruction may get shorter); the
#: default "Classify the sentiment of the tweet." (36) is compared: "The task" is a stub.
MIN_COMPARED_CHARS = 20
#: A repeated sentence counts when it has at least this many words (``repeats``).
MIN_SENTENCE_WORDS = 2
#: A phrase of NGRAM words said NGRAM_REPEATS times is a repetition (``repeats``).
NGRAM = 3
NGRAM_REPEATS = 3
#: One word this many times in a row is a repetition (``repeats``).
WORD_RUN = 4
#: List items that are not labels but common words of a rule ("or nothing else", "etc").
LIST_FILLERS = frozenset(
    {"etc", "else", "only", "nothing", "one", "them", "it", "this", "that", "other", "none"}
)

#: {rule: the reason shown to a person}.
REASONS = {
    "empty": "the text is empty",
    "punctuation": "the text is punctuation only",
    "shorter": "the text is much shorter than its parent's",
    "repeats": "the text repeats itself",
    "unknown_labels": "the text names labels outside the label set",
    "unchanged": "the text equals its parent's",
}

_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)
_SENTENCE = re.compile(r"[.!?;\n]+")
_QUOTED = re.compile(r"[\"'`“‘]([^\"'`”’\n]{1,40})[\"'`”’]")
_LIST_SPLIT = re.compile(r",|/|\||\bor\b|\band\b|:", re.IGNORECASE)


@dataclass(frozen=True)
class Refusal:
    """Why a candidate's text was refused: the ``rule`` (a key of :data:`REASONS`), its
    ``reason`` in words, and the ``field`` of the variable it was found in."""

    rule: str
    reason: str
    field: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "reason": self.reason, "field": self.field}


def words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _normal(text: str) -> str:
    return " ".join(words(text))


# -- the rules (each: the text, its parents' texts, the label set -> fires or not) -----------
def is_empty(text: str) -> bool:
    return not text.strip()


def is_punctuation(text: str) -> bool:
    return bool(text.strip()) and not any(ch.isalnum() for ch in text)


def is_much_shorter(text: str, parents: Sequence[str]) -> bool:
    compared = [len(p.strip()) for p in parents if len(p.strip()) >= MIN_COMPARED_CHARS]
    return bool(compared) and len(text.strip()) < SHORTER_RATIO * min(compared)


def repeats_itself(text: str) -> bool:
    sentences = [_normal(s) for s in _SENTENCE.split(text)]
    sentences = [s for s in sentences if len(s.split()) >= MIN_SENTENCE_WORDS]
    if len(sentences) != len(set(sentences)):
        return True
    # Within one sentence only: a list of rules ("When you see X, answer A. When you see Y,
    # answer B. ...") repeats its opening phrase by design, one sentence each; a loop ("the
    # output of the output of the output of") repeats it inside one run-on sentence.
    for sentence in _SENTENCE.split(text):
        tokens = words(sentence)
        ngrams = Counter(tuple(tokens[i : i + NGRAM]) for i in range(len(tokens) - NGRAM + 1))
        if ngrams and max(ngrams.values()) >= NGRAM_REPEATS:
            return True
    tokens = words(text)
    run = 1
    for previous, word in zip(tokens, tokens[1:], strict=False):
        run = run + 1 if word == previous else 1
        if run >= WORD_RUN:
            return True
    return False


def unknown_labels(text: str, labels: Collection[str] | None) -> list[str]:
    """Words the text lists or quotes beside a label of ``labels`` that are not labels (its
    invented labels); [] without a label set."""
    if not labels:
        return []
    known = {label.strip().lower() for label in labels}
    invented: list[str] = []

    def consider(items: list[str]) -> None:
        names = [" ".join(words(item)) for item in items]
        names = [name for name in names if name]
        if not any(name in known for name in names):
            return
        for name in names:
            single = len(name.split()) == 1
            if name not in known and single and name not in LIST_FILLERS and name not in invented:
                invented.append(name)

    consider(_QUOTED.findall(text))
    for sentence in _SENTENCE.split(text):
        items = []
        for item in _LIST_SPLIT.split(sentence):
            item_words = words(item)
            if len(item_words) == 1:
                items.append(item)
            elif item_words and item_words[-1] in known:
                items.append(item_words[-1])  # "... as negative", the list's first item
        if len(items) >= 2:
            consider(items)
    return invented


def _spaced(text: str) -> str:
    return " ".join(text.split())


def is_unchanged(text: str, parents: Sequence[str]) -> bool:
    """The same text as a parent's, but for whitespace."""
    return any(_spaced(text) == _spaced(parent) for parent in parents)


def text_refusal(
    text: str, parents: Sequence[str], labels: Collection[str] | None = None
) -> str | None:
    """The first rule ``text`` breaks (a key of :data:`REASONS`), or None.

    Args:
        text: what the LM wrote.
        parents: the same field's text in each parent.
        labels: the output's label set (None: not a label task).

    Example:
        >>> text_refusal(", ", ["Classify the sentiment of the tweet."])
        'punctuation'
    """
    if is_unchanged(text, parents):
        return "unchanged"
    if is_empty(text):
        return "empty"
    if is_punctuation(text):
        return "punctuation"
    if is_much_shorter(text, parents):
        return "shorter"
    if repeats_itself(text):
        return "repeats"
    if unknown_labels(text, labels):
        return "unknown_labels"
    return None


def refusal(
    edited: dict[str, Any],
    parents: Sequence[dict[str, Any]],
    labels: Collection[str] | None = None,
) -> Refusal | None:
    """Why the LM's ``edited`` fields must not become a candidate, or None when they may.

    Every string field is checked against the same field of each parent; a value whose every
    field equals a parent's is ``unchanged``, one changed field is enough to be new.

    Args:
        edited: the editable fields the LM wrote (``{"instructions": ...}``).
        parents: each parent's editable fields.
        labels: the labels of the output's label fields, when the task has a label set.

    Returns:
        A :class:`Refusal`, or None.
    """

    def same(value: Any, other: Any) -> bool:
        if isinstance(value, str) and isinstance(other, str):
            return _spaced(value) == _spaced(other)
        return value == other

    for parent in parents:  # first: a parent given back is "unchanged", whatever it holds
        if set(edited) == set(parent) and all(same(edited[k], parent[k]) for k in edited):
            field = next((k for k, v in edited.items() if isinstance(v, str)), "")
            return Refusal("unchanged", REASONS["unchanged"], field)
    for field, text in edited.items():
        if not isinstance(text, str):
            continue
        before = [p.get(field) for p in parents if isinstance(p.get(field), str)]
        rule = text_refusal(text, before, labels)
        if rule is not None and rule != "unchanged":  # one changed field is enough to be new
            return Refusal(rule, REASONS[rule], field)
    return None


__all__ = ["REASONS", "Refusal", "refusal", "text_refusal", "unknown_labels"]
