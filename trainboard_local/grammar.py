"""JSON schema → llama.cpp grammar whose every output closes before ``max_tokens``.

Why this exists: with a grammar, a 135M model never writes invalid JSON — except by running out
of tokens. It happily rambles inside one string until ``max_tokens`` and the call returns a
truncated, unparseable object. So before the schema becomes a grammar, :func:`bound_schema`
gives every string a ``maxLength`` and every array a ``maxItems`` (tightening the caller's own
bounds where they cannot all fit) so that the longest output the grammar admits fits in the
token budget. When the model reaches a bound the grammar only lets it close the string: the
answer is cut short, but it is valid JSON that fits the caller's schema (a value shorter than a
``maxLength`` still satisfies it).

The budget counts one token per byte of JSON structure (keys, quotes, commas, numbers) and
``chars_per_token`` characters of string content per token. With 1.0 the bound is strict: every
token of plain text carries at least one character (only characters split over several
byte-level tokens — emoji, ``\\uXXXX`` escapes — could overrun it). ``smollm2.complete`` first
asks with 2.0 (SmolLM2 averages ~3 characters per token on English, so strings get twice the
room) and, in the rare case the answer is still cut off, retries once with the strict 1.0.

The whitespace between JSON tokens is fixed to ``json.dumps``'s (``{"a": 1, "b": [1, 2]}``:
one space after ``:`` and ``,``, none elsewhere; :func:`canonical_spacing`) instead of the
converter's optional space after every token. SmolLM2 writes that layout anyway (it is how
the prompts show JSON), and with it the structure between two values is *forced*: the
decoder appends ``", "team": "`` without sampling each of its tokens (``decoding.py``).

Two faults of llama-cpp-python 0.3.36's converter are worked around here:

- it writes ``maxLength: N`` as N nested optional groups, which llama.cpp's parser rejects
  above ~1000 ("exceeds sane defaults") — and a rejected grammar then *segfaults* the process
  when sampling starts. :class:`BoundedConverter` writes ``char{m,n}`` instead (and
  ``item ("," item){m,n}`` for arrays), which llama.cpp expands itself;
- :func:`check_grammar` parses a grammar with llama.cpp before it is used, so a grammar that
  llama.cpp refuses becomes a clear error instead of a crash.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from llama_cpp.llama_grammar import RESERVED_NAMES, BuiltinRule, SchemaConverter

#: One character of a JSON string. The converter's own rule (``[^"\\]``) admits raw control
#: characters (a newline inside a string), which no JSON parser accepts; JSON (RFC 8259 §7)
#: wants them escaped, so they are left out here.
JSON_CHAR = BuiltinRule(
    r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])',
    [],
)
#: Items an array may hold when its schema sets no ``maxItems``.
DEFAULT_MAX_ITEMS = 8
#: Worst-case bytes of a JSON number / integer as the converter's grammar allows them.
NUMBER_BYTES = 54
INTEGER_BYTES = 18
#: Bytes assumed for a string whose pattern or format the budget cannot measure.
UNMEASURED_STRING_BYTES = 64
#: A string is never bounded below this many characters (unless its own maxLength is lower).
MIN_STRING_CHARS = 8
#: Deepest $ref inlining; a deeper (recursive) schema is left unbounded.
MAX_REF_DEPTH = 16


class UnboundableSchema(Exception):
    """The schema admits outputs of unbounded size (free-form objects, recursion)."""


@dataclass
class _Cost:
    """Worst-case size of a sub-schema: fixed bytes + tunable string slots."""

    fixed: int = 0
    #: (string schema node, how many times it can occur)
    slots: list[tuple[dict, int]] = field(default_factory=list)
    unbounded: bool = False

    def add(self, other: _Cost, times: int = 1) -> None:
        self.fixed += other.fixed * times
        self.slots.extend((node, count * times) for node, count in other.slots)
        self.unbounded = self.unbounded or other.unbounded


def _inline_refs(node: Any, root: dict, depth: int = 0) -> Any:
    """A copy of ``node`` with every local ``$ref`` replaced by its target (so each use of a
    shared definition gets its own bounds)."""
    if depth > MAX_REF_DEPTH:
        raise UnboundableSchema("recursive schema")
    if isinstance(node, list):
        return [_inline_refs(item, root, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            raise UnboundableSchema(f"unresolvable $ref {ref!r}")
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline_refs(merged, root, depth + 1)
    return {
        key: _inline_refs(value, root, depth)
        for key, value in node.items()
        if key not in ("$defs", "definitions")
    }


def _string_cost(node: dict) -> _Cost:
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return _Cost(fixed=max(len(json.dumps(v)) for v in values) + 1)
    if "pattern" in node or node.get("format"):
        return _Cost(fixed=UNMEASURED_STRING_BYTES)
    return _Cost(fixed=3, slots=[(node, 1)])  # quotes + trailing space


def _cost(node: Any) -> _Cost:
    """Worst-case output size of ``node``; adds ``maxItems`` to arrays that have none."""
    if not isinstance(node, dict) or not node:
        return _Cost(unbounded=True)
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return _Cost(fixed=max(len(json.dumps(v)) for v in values) + 1)
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        total = _Cost()
        for option in options:  # alternatives: counting them all over-estimates, safely
            total.add(_cost(option))
        return total
    kind = node.get("type")
    if isinstance(kind, list):
        total = _Cost()
        for single in kind:
            total.add(_cost({**node, "type": single}))
        return total
    if kind == "string":
        return _string_cost(node)
    if kind == "integer":
        return _Cost(fixed=INTEGER_BYTES)
    if kind == "number":
        return _Cost(fixed=NUMBER_BYTES)
    if kind == "boolean":
        return _Cost(fixed=6)
    if kind == "null":
        return _Cost(fixed=5)
    if kind == "array" and isinstance(node.get("items"), dict):
        low = int(node.get("minItems", 0))
        if node.get("maxItems") is None:
            node["maxItems"] = max(low, DEFAULT_MAX_ITEMS)
        total = _Cost(fixed=3)
        total.add(_cost(node["items"]), int(node["maxItems"]))
        total.fixed += 2 * int(node["maxItems"])  # ", " separators
        return total
    if kind in (None, "object") and isinstance(node.get("properties"), dict):
        total = _Cost(fixed=3)
        for name, spec in node["properties"].items():
            total.fixed += len(json.dumps(name)) + 4  # key, colon, spaces, comma
            total.add(_cost(spec))
        extra = node.get("additionalProperties")
        if extra is True or isinstance(extra, dict) and extra:
            total.unbounded = True
        return total
    return _Cost(unbounded=True)  # free-form object / array, or an unknown construct


def _allot(slots: list[tuple[dict, int]], budget: int) -> None:
    """Water-filling: the largest level L with Σ count·min(cap, max(floor, L)) ≤ budget (but
    at least MIN_STRING_CHARS); each string then gets ``maxLength = min(cap, max(floor, L))``."""

    def length(node: dict, level: int) -> int:
        floor = int(node.get("minLength", 0))
        cap = node.get("maxLength")
        value = max(floor, level)
        return value if cap is None else min(max(floor, int(cap)), value)

    def used(level: int) -> int:
        return sum(count * length(node, level) for node, count in slots)

    low, high = 0, max(budget, 0)
    while low < high:  # largest level whose total fits
        middle = (low + high + 1) // 2
        if used(middle) <= budget:
            low = middle
        else:
            high = middle - 1
    level = max(low, MIN_STRING_CHARS)
    for node, _ in slots:
        node["maxLength"] = length(node, level)


def bound_schema(
    schema: dict, token_budget: int, chars_per_token: float = 1.0
) -> tuple[dict, bool]:
    """A copy of ``schema`` whose longest admitted output fits in ``token_budget`` tokens,
    counting ``chars_per_token`` characters of string content per token.

    Returns (schema, fits): ``fits`` is False when part of the schema cannot be bounded (a
    free-form object, recursion) or even the shortest strings overflow the budget; strings and
    arrays are bounded all the same. Every output of the returned schema is valid against the
    original one.
    """
    try:
        bounded = _inline_refs(copy.deepcopy(schema), schema)
    except UnboundableSchema:
        return copy.deepcopy(schema), False
    cost = _cost(bounded)
    _allot(cost.slots, int((token_budget - cost.fixed) * chars_per_token))
    chars = sum(count * int(node["maxLength"]) for node, count in cost.slots)
    return bounded, not cost.unbounded and cost.fixed + chars / chars_per_token <= token_budget


class BoundedConverter(SchemaConverter):
    """The llama-cpp-python converter, but bounded strings and arrays use ``{m,n}`` and a
    string character is never a raw control character (:data:`JSON_CHAR`)."""

    def _add_primitive(self, name: str, rule: BuiltinRule) -> str:
        if name == "char":
            rule = JSON_CHAR
        return super()._add_primitive(name, rule)

    def visit(self, schema: dict, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
        kind = schema.get("type")
        plain = not any(
            key in schema for key in ("$ref", "anyOf", "oneOf", "const", "enum", "pattern")
        )
        if plain and kind == "string" and not schema.get("format"):
            if "maxLength" in schema or "minLength" in schema:
                char = self._add_primitive("char", JSON_CHAR)
                return self._add_rule(rule_name, r'"\"" ' + _repeat(char, schema) + r' "\"" space')
        if plain and kind == "array" and isinstance(schema.get("items"), dict):
            if "maxItems" in schema or "minItems" in schema:
                item = self.visit(schema["items"], f"{name}{'-' if name else ''}item")
                return self._add_rule(
                    rule_name, '"[" space ' + _repeat(item, schema, '"," space') + ' "]" space'
                )
        return super().visit(schema, name)


def _repeat(item: str, schema: dict, separator: str | None = None) -> str:
    """``item{m,n}`` (or separated ``item (sep item){m-1,n-1}``) for a string or an array."""
    if separator is None:
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    else:
        low, high = int(schema.get("minItems", 0)), schema.get("maxItems")
    top = "" if high is None else str(int(high))
    if separator is None:
        return f"{item}{{{low},{top}}}"
    if high is not None and int(high) == 0:
        return ""
    rest_top = "" if high is None else str(int(high) - 1)
    body = f"{item} ({separator} {item}){{{max(low - 1, 0)},{rest_top}}}"
    return body if low >= 1 else f"({body})?"


@lru_cache(maxsize=256)
def grammar_text(
    schema_json: str, token_budget: int | None, chars_per_token: float = 1.0
) -> tuple[str, bool]:
    """(GBNF, fits) for a JSON schema, bounded to ``token_budget`` tokens when given (see
    :func:`bound_schema`)."""
    schema = json.loads(schema_json)
    guaranteed = False
    if token_budget is not None:
        schema, guaranteed = bound_schema(schema, token_budget, chars_per_token)
    converter = BoundedConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = converter.resolve_refs(schema, "stdin")
    converter.visit(schema, "")
    return canonical_spacing(converter.format_grammar()), guaranteed


#: The converter's separators, written with its optional-space rule, and json.dumps's.
_SEPARATORS = {'":" space': '":" " "', '"," space': '"," " "'}


def canonical_spacing(text: str) -> str:
    """``text`` (the converter's GBNF) with json.dumps's whitespace: one space after ``:`` and
    ``,``, none after anything else (its ``space ::= " "?`` becomes ``space ::= ""``).

    Example:
        ``{"team": "money"}`` stays admitted; ``{ "team" : "money" }`` no longer is.
    """
    for optional, fixed in _SEPARATORS.items():
        text = text.replace(optional, fixed)
    return re.sub(r"^space ::= .*$", 'space ::= ""', text, flags=re.MULTILINE)


_CHECKED: set[str] = set()


def check_grammar(llama: Any, text: str) -> None:
    """Let llama.cpp parse ``text`` once; raise ValueError if it refuses.

    llama-cpp-python does not check the sampler llama.cpp returns for a grammar, and a refused
    grammar then crashes the process with a segfault on the first sampled token.
    """
    if text in _CHECKED:
        return
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(
        llama._model.vocab, text.encode("utf-8"), b"root"
    )
    if not sampler:
        raise ValueError("llama.cpp refused the grammar built from the JSON schema")
    llama_cpp.llama_sampler_free(sampler)
    _CHECKED.add(text)
