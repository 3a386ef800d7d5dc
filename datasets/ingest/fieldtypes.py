"""Field types: guessing a column's type from its values, and converting values to a type.

The types are the ones the engine's ``create_data_model`` accepts (str, int, float, bool,
list[str]), so a dataset's schema becomes a program's DataModels unchanged.
"""

import json
import math
import re
from typing import Any

from core.bounded_json import describe_surrogate, lone_surrogate, nesting_depth_exceeds

FIELD_TYPES = ["str", "int", "float", "bool", "list[str]"]
# A list[str] cell holds a flat JSON array; a little nesting is shown as JSON text.
LIST_TEXT_MAX_NESTING = 8

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


def is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def kind_of(value: Any, sniff_strings: bool) -> str:
    """The narrowest field type a single non-empty value fits ('json' for nested values).

    CSV gives only strings, so ``sniff_strings`` looks inside them ("42" is an int); a
    string in JSON was written as a string on purpose and stays one.
    """
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        if sniff_strings:
            text = value.strip()
            if _INT.fullmatch(text):
                return "int"
            if _FLOAT.fullmatch(text):
                return "float"
            if text.lower() in ("true", "false"):
                return "bool"
        return "str"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "list[str]"
    return "json"


def combine_kinds(kinds: set[str]) -> str:
    """The type that holds every kind seen in a column."""
    if not kinds:
        return "str"
    if len(kinds) == 1:
        kind = next(iter(kinds))
        return "str" if kind == "json" else kind
    if kinds <= {"int", "float"}:
        return "float"
    return "str"


def display(value: Any) -> str:
    """A value as text for previews (never HTML: templates escape it)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class ConversionError(ValueError):
    pass


def convert(value: Any, field_type: str) -> Any:
    """Convert a non-empty value to ``field_type`` or raise ConversionError saying why."""
    if field_type == "str":
        return value if isinstance(value, str) else display(value)
    if field_type == "int":
        if isinstance(value, bool):
            raise ConversionError("a boolean is not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT.fullmatch(value.strip()):
            return int(value.strip())
        raise ConversionError("not an integer")
    if field_type == "float":
        if isinstance(value, bool):
            raise ConversionError("a boolean is not a number")
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
            number = float(value.strip())
        else:
            raise ConversionError("not a number")
        if not math.isfinite(number):
            raise ConversionError("not a finite number")
        return number
    if field_type == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            text = value.strip().lower()
            if text in _TRUE or text == "1":
                return True
            if text in _FALSE or text == "0":
                return False
        raise ConversionError("not a boolean (true/false, yes/no, 1/0)")
    if field_type == "list[str]":
        if isinstance(value, str):
            text = value
            if nesting_depth_exceeds(text, LIST_TEXT_MAX_NESTING) is not None:
                raise ConversionError("not a list of texts (nested too deeply)")
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise ConversionError('not a list (write it as a JSON array: ["a", "b"])') from None
            bad = lone_surrogate(value, text)
            if bad is not None:
                raise ConversionError(f"it holds {describe_surrogate(bad)}")
        if isinstance(value, list):
            return [item if isinstance(item, str) else display(item) for item in value]
        raise ConversionError("not a list")
    raise ConversionError(f"unknown type {field_type!r}")
