"""What every reader yields: one row of the file and the line it starts on."""

from typing import Any, NamedTuple


class Record(NamedTuple):
    line: int  # 1-based line where the row starts, for error messages
    values: dict[str, Any]  # column name -> value as read (str for CSV, JSON types otherwise)
