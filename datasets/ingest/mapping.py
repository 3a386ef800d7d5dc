"""Validating the user's column → field mapping, and applying it to each row.

A mapping is a list of ``{"column", "role" ("input"|"target"), "name", "type",
"description", "labels"}``; the type :data:`LABEL_SET` makes a ``str`` target whose
``choices`` are the column's ``labels`` (the distinct values the upload's profile found). The result feeds ``create_data_model``, so names must be valid Python
identifiers and unique across inputs and targets.
"""

import keyword
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from datasets.ingest.errors import DatasetError
from datasets.ingest.fieldtypes import FIELD_TYPES, ConversionError, convert, is_empty
from datasets.ingest.label_guess import PROPOSE_MAX_LABELS, PROPOSE_MIN_ROWS_PER_LABEL
from datasets.ingest.records import Record

ROLES = ("input", "target")
#: The mapping step's "label set" type: stored as ``str`` with ``choices``.
LABEL_SET = "label set"
MAX_NAME = 64
MAX_DESCRIPTION = 1000


def field_name_for(column: str, position: int) -> str:
    """A valid field name suggested for a column name ("Question text" → question_text)."""
    name = re.sub(r"\W+", "_", column.strip().lower()).strip("_")
    name = re.sub(r"^[\d_]+", "", name)[:MAX_NAME]
    if not name or keyword.iskeyword(name):
        name = f"field_{position}" if not name else f"{name}_"
    return name


@dataclass
class Mapping:
    """A validated mapping: schema lists as stored on the dataset, plus source columns."""

    input_fields: list[dict[str, str]] = field(default_factory=list)
    target_fields: list[dict[str, str]] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)  # field name -> source column

    @property
    def fields(self) -> list[dict[str, str]]:
        return self.input_fields + self.target_fields


def validate_mapping(entries: Iterable[dict[str, Any]], available: list[str]) -> Mapping:
    """Check a mapping against the file's columns; raise DatasetError listing the problem."""
    mapping = Mapping()
    used_columns: set[str] = set()
    for entry in entries:
        column = str(entry.get("column", ""))
        role = entry.get("role", "")
        if role not in ROLES:
            raise DatasetError(f"Column {column!r}: the role must be 'input' or 'target'.")
        if column not in available:
            listed = ", ".join(repr(name) for name in available)
            raise DatasetError(
                f"The mapped column {column!r} does not exist in the file; "
                f"its columns are {listed}."
            )
        if column in used_columns:
            raise DatasetError(f"Column {column!r} is mapped twice.")
        used_columns.add(column)
        name = str(entry.get("name") or "").strip()
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise DatasetError(
                f"Field name {name!r} (column {column!r}) must be letters, digits and "
                "underscores, not start with a digit or underscore, and not be a Python keyword."
            )
        if len(name) > MAX_NAME:
            raise DatasetError(f"Field name {name!r} is longer than {MAX_NAME} characters.")
        if name in mapping.columns:
            raise DatasetError(f"Two fields are named {name!r}; field names must be unique.")
        field_type = entry.get("type", "str")
        choices = None
        if field_type == LABEL_SET:
            choices = _label_choices(entry, name, column, role)
            field_type = "str"
        if field_type not in FIELD_TYPES:
            raise DatasetError(
                f"Field {name!r}: type {field_type!r} is not one of "
                f"{', '.join([*FIELD_TYPES, LABEL_SET])}."
            )
        description = str(entry.get("description") or "").strip()
        if len(description) > MAX_DESCRIPTION:
            raise DatasetError(
                f"Field {name!r}: the description is longer than {MAX_DESCRIPTION} characters."
            )
        spec = {"name": name, "type": field_type, "description": description}
        if choices is not None:
            spec["choices"] = choices
        (mapping.input_fields if role == "input" else mapping.target_fields).append(spec)
        mapping.columns[name] = column
    if not mapping.input_fields:
        raise DatasetError("Map at least one column to an input field.")
    if not mapping.target_fields:
        raise DatasetError("Map at least one column to a target field.")
    return mapping


def _label_choices(entry: dict[str, Any], name: str, column: str, role: str) -> list[str]:
    if role != "target":
        raise DatasetError(
            f"Field {name!r}: a label set is what a program answers, so only a target can be "
            "one; make the input str."
        )
    labels = [str(label) for label in entry.get("labels") or []]
    if not labels:
        raise DatasetError(
            f"Column {column!r} has no small set of distinct values to make a label set of "
            f"(a label set has 2 to {PROPOSE_MAX_LABELS} short values, each on at least "
            f"{PROPOSE_MIN_ROWS_PER_LABEL} rows on average); keep it str."
        )
    return sorted(labels)


@dataclass
class MappedRows:
    """Iterates converted rows; counts the rows skipped for empty mapped values."""

    records: Iterable[Record]
    mapping: Mapping
    skip_incomplete: bool = False
    skipped: int = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        specs = [
            (f["name"], f["type"], self.mapping.columns[f["name"]]) for f in self.mapping.fields
        ]
        for record in self.records:
            row: dict[str, Any] = {}
            for name, field_type, column in specs:
                value = record.values.get(column)
                if is_empty(value):
                    if self.skip_incomplete:
                        break
                    if field_type == "str":
                        row[name] = ""
                        continue
                    raise DatasetError(
                        f"Line {record.line}: column {column!r} is empty but field {name!r} "
                        f"is {field_type}. Fix the file, or choose to skip incomplete rows.",
                        line=record.line,
                    )
                try:
                    row[name] = convert(value, field_type)
                except ConversionError as exc:
                    shown = str(value)
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    raise DatasetError(
                        f"Line {record.line}: column {column!r} value {shown!r} cannot be "
                        f"field {name!r} of type {field_type}: {exc}.",
                        line=record.line,
                    ) from None
            else:
                yield row
                continue
            self.skipped += 1
