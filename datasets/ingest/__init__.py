"""Streaming ingestion of uploaded dataset files.

Pure Python (no Django import) so it can be unit-tested and benchmarked on its own:
decoding with precise error positions, one reader per format, schema inference and
profiling, field mapping validation and the reproducible train/test split.
"""

from datasets.ingest.errors import DatasetError
from datasets.ingest.formats import FORMATS, detect_format, iter_records

__all__ = ["DatasetError", "FORMATS", "detect_format", "iter_records"]
