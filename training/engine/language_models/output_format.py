"""How a LanguageModel tells the model what to output: a short field list in the system prompt.

Why: with ``response_format`` json_schema the schema travels outside the prompt (for
``local/smollm2`` it only becomes a llama.cpp grammar), so the model would write values without
ever reading what the fields *mean*. Every call therefore names the output fields, their types
and descriptions in a few compact lines — never the whole schema, because a small local model
has a 4096-token context and every prompt token costs time. Providers that cannot enforce a
schema also get the schema itself, compacted (no titles, no whitespace), so strict parsing has
something to hold the model to.
"""

from __future__ import annotations

import copy
import json
import weakref
from typing import Any

#: Longest description kept per field (a description is guidance, not a document).
MAX_DESCRIPTION_CHARS = 300

_NOTES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _resolve(spec: dict, schema: dict) -> dict:
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = schema
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node if isinstance(node, dict) else {}
    return spec


def type_text(spec: Any, schema: dict) -> str:
    """A short human name for a JSON-schema type: ``string``, ``list of string``, ``one of …``."""
    if not isinstance(spec, dict):
        return "any"
    spec = _resolve(spec, schema)
    if "enum" in spec:
        return "one of " + ", ".join(json.dumps(value) for value in spec["enum"])
    if "const" in spec:
        return f"always {json.dumps(spec['const'])}"
    for key in ("anyOf", "oneOf"):
        if isinstance(spec.get(key), list):
            options = [type_text(option, schema) for option in spec[key]]
            return " or ".join(dict.fromkeys(options))
    kind = spec.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return f"list of {type_text(spec.get('items'), schema)}"
    if kind == "object" and spec.get("title"):
        return f"object {spec['title']}"
    return str(kind or "any")


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    if len(text) > MAX_DESCRIPTION_CHARS:
        text = text[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return text


def fields_note(schema: dict) -> str:
    """``Output fields (Answer):`` then one ``- name (type): description`` line per field."""
    title = schema.get("title") or "output"
    lines = [f"Output: one JSON object ({title}) with these fields:"]
    for name, spec in (schema.get("properties") or {}).items():
        line = f"- {name} ({type_text(spec, schema)})"
        description = spec.get("description") if isinstance(spec, dict) else None
        if description:
            line += f": {_one_line(description)}"
        lines.append(line)
    return "\n".join(lines)


def compact_schema(node: Any, mapping: bool = False) -> Any:
    """The schema without ``title`` annotations (a property *named* title is kept)."""
    if isinstance(node, dict):
        if mapping:  # keys are names (properties, $defs), values are schemas
            return {key: compact_schema(value) for key, value in node.items()}
        return {
            key: compact_schema(value, key in ("properties", "$defs", "definitions"))
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [compact_schema(item) for item in node]
    return node


def schema_note(schema: dict) -> str:
    """For providers without ``response_format``: the compact schema the answer must follow.

    Top-level field descriptions are left out: :func:`fields_note` already gives them.
    """
    compact = compact_schema(schema)
    properties = compact.get("properties")
    if isinstance(properties, dict):
        compact["properties"] = {
            name: {k: v for k, v in spec.items() if k != "description"}
            if isinstance(spec, dict)
            else spec
            for name, spec in properties.items()
        }
    text = json.dumps(compact, ensure_ascii=False, separators=(",", ":"))
    return (
        "Answer with a single JSON object (no prose, no code fences) that follows this JSON "
        f"schema:\n{text}"
    )


def output_note(schema: dict, with_schema: bool, key: Any = None) -> str:
    """The text appended to the system prompt; memoised per DataModel class when ``key`` is one."""
    cached = None
    if key is not None:
        try:
            cached = _NOTES.get(key)
        except TypeError:
            key = None
    if cached is None:
        cached = (fields_note(schema), schema_note(schema))
        if key is not None:
            _NOTES[key] = cached
    return f"{cached[0]}\n\n{cached[1]}" if with_schema else cached[0]


def with_output_note(messages: list[dict], note: str) -> list[dict]:
    """A copy of ``messages`` whose system message ends with ``note`` (one is added if none)."""
    result = copy.copy(messages)
    if result and result[0].get("role") == "system":
        result[0] = {**result[0], "content": f"{result[0].get('content') or ''}\n\n{note}"}
    else:
        result.insert(0, {"role": "system", "content": note})
    return result
