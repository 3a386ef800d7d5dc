"""Forgiving JSON extraction from LM text + strict validation against the target DataModel.

Forgiving where JSON allows it: code fences, prose around the object, raw control characters
inside strings (``json.loads(strict=False)``), a trailing comma. Strict about the schema: the
object must validate against the DataModel (no missing or extra fields, no type coercion of
strings into numbers).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class OutputParseError(ValueError):
    """The LM output is not a JSON object matching the expected schema."""


def extract_json(text: str) -> Any:
    """The first JSON object found in ``text`` (raises :class:`OutputParseError`)."""
    if not isinstance(text, str) or not text.strip():
        raise OutputParseError("empty LM output")
    candidates = [text.strip()]
    candidates += [match.strip() for match in _FENCE.findall(text)]
    start = text.find("{")
    if start != -1:
        end = _matching_brace(text, start)
        if end != -1:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                return json.loads(attempt, strict=False)
            except (json.JSONDecodeError, ValueError):
                continue
    snippet = text.strip().replace("\n", " ")[:120]
    raise OutputParseError(f"LM output is not JSON: {snippet!r}")


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def parse_output(text: str, data_model: type[pydantic.BaseModel]) -> pydantic.BaseModel:
    """Parse LM text into an instance of ``data_model`` (strict types, no extra fields)."""
    data = text if isinstance(text, dict) else extract_json(text)
    return validate_output(data, data_model)


def validate_output(data: Any, data_model: type[pydantic.BaseModel]) -> pydantic.BaseModel:
    if not isinstance(data, dict):
        raise OutputParseError(
            f"expected a JSON object for {data_model.__name__}, got {type(data).__name__}"
        )
    try:
        return data_model.model_validate(data, strict=True)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise OutputParseError(
            f"LM output does not match {data_model.__name__}: {problems}"
        ) from None
