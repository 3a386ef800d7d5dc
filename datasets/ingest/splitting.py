"""The reproducible train/test split: the same (row count, ratio, seed) → the same split."""

import numpy as np

from datasets.ingest.errors import DatasetError


def count_test_rows(row_count: int, test_ratio: float) -> int:
    """Rows in the test split: rounded, and at least one row in each split."""
    if not 0.0 < test_ratio < 1.0:
        raise DatasetError("The test ratio must be between 0 and 1 (e.g. 0.2 for 20%).")
    if row_count < 2:
        raise DatasetError(
            f"A train/test split needs at least 2 rows; this dataset has {row_count}."
        )
    return min(max(round(row_count * test_ratio), 1), row_count - 1)


def split_mask(row_count: int, test_ratio: float, seed: int) -> np.ndarray:
    """Boolean array, True where row i (in file order) belongs to the test split.

    numpy's PCG64 generator is stable across numpy versions for ``permutation``, so a
    stored (ratio, seed) pair describes the split exactly.
    """
    size = count_test_rows(row_count, test_ratio)
    mask = np.zeros(row_count, dtype=bool)
    mask[np.random.default_rng(seed).permutation(row_count)[:size]] = True
    return mask
