"""The one exception type ingestion raises, carrying where the problem is.

Views show ``str(error)`` to the user as is, so every message says what is wrong and where
(line, byte offset, column) in words a person who made the file can act on.
"""


class DatasetError(ValueError):
    """A problem with an uploaded file or a field mapping; nothing is saved when raised."""

    def __init__(self, message: str, *, line: int | None = None, byte: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.byte = byte

    def __str__(self) -> str:
        return self.message
