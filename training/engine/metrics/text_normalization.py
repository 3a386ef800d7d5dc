"""SQuAD-style answer normalisation and tokenisation for the token-overlap metrics.

Lowercase, drop punctuation (ASCII and Unicode), drop the articles a/an/the, and
split on whitespace — so "The Eiffel Tower." and "eiffel tower" are the same
answer. Numbers are written without a spurious ``.0`` so that a ground truth of
``18`` and a prediction of ``18.0`` match.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b", flags=re.UNICODE)


def value_text(value: Any) -> str:
    """The text of one field value, before normalisation."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return " ".join(value_text(item) for item in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _strip_punctuation(text: str) -> str:
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation and articles, collapse whitespace."""
    text = _strip_punctuation(text.lower())
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def tokenize(value: Any) -> list[str]:
    """Normalised whitespace tokens of a field value."""
    return normalize_answer(value_text(value)).split()
