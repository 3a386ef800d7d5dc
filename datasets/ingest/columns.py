"""How many columns a dataset file may have, checked while reading, before any other work.

Why a limit: every column becomes a row of the mapping form (five inputs each), a column
of the preview table and a counter in the profile: a 5,000-column CSV would make a 5.8 MB
preview page and a mapping form Django refuses to parse. A hundred columns is far more
than a program's fields need, and keeps the form well under Django's field-count limit
(``DATA_UPLOAD_MAX_NUMBER_FIELDS``; the settings check the two agree).
"""

from datasets.ingest.errors import DatasetError

MAX_COLUMNS = 100
# Inputs the mapping form posts per column (column, role, name, type, description).
MAPPING_INPUTS_PER_COLUMN = 5


def check_column_count(count: int, line: int, where: str) -> None:
    """Raise DatasetError when ``count`` columns are more than MAX_COLUMNS.

    Args:
        count: columns seen so far.
        line: the line that brought them (named in the message).
        where: what holds them, in words ("the header", "the object").
    """
    if count > MAX_COLUMNS:
        raise DatasetError(
            f"Line {line}: {where} has {count:,} columns; Trainboard reads at most "
            f"{MAX_COLUMNS} columns. Keep only the columns your program needs.",
            line=line,
        )
