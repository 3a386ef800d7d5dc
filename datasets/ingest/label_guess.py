"""What a class label looks like: a text column with few distinct short values relative to its
rows. One rule, read by the upload's profile (the mapping step offers "label set" from it) and
by ``datasets.labels`` (the dataset page proposes one for a target declared as plain text).

Pure Python, no Django: the streaming profile (``datasets.ingest.profile``) counts each
column's distinct values with :class:`DistinctValues`, bounded by :data:`PROPOSE_MAX_LABELS`.
"""

from __future__ import annotations

#: A label set is proposed when a str target has at most this many distinct values ...
PROPOSE_MAX_LABELS = 20
#: ... each at most this many characters ...
PROPOSE_MAX_CHARS = 40
#: ... and on average at least this many rows per value (few values relative to rows).
PROPOSE_MIN_ROWS_PER_LABEL = 3


def looks_like_label(values: list[str], row_count: int) -> bool:
    """Few distinct short values relative to the rows: what a class label looks like."""
    return (
        2 <= len(values) <= PROPOSE_MAX_LABELS
        and all(0 < len(value) <= PROPOSE_MAX_CHARS for value in values)
        and len(values) * PROPOSE_MIN_ROWS_PER_LABEL <= row_count
    )


class DistinctValues:
    """A column's distinct non-empty text values while a file streams by, kept only while
    they could still be a label set (at most ``PROPOSE_MAX_LABELS``, each short): memory is
    bounded whatever the file."""

    def __init__(self) -> None:
        self.values: set[str] | None = set()

    def add(self, value: object) -> None:
        if self.values is None:
            return
        if not isinstance(value, str) or len(value) > PROPOSE_MAX_CHARS:
            self.values = None
            return
        self.values.add(value)
        if len(self.values) > PROPOSE_MAX_LABELS:
            self.values = None

    def labels(self, row_count: int) -> list[str] | None:
        """The sorted values when they look like a label set over ``row_count`` rows."""
        if self.values is None:
            return None
        values = sorted(self.values)
        return values if looks_like_label(values, row_count) else None
