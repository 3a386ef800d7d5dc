"""The reproducible train/test split: the same (row count, ratio, seed) → the same split.

The split's limits live here and only here: the settings form builds its fields from
``TEST_RATIO_MIN``/``TEST_RATIO_MAX``/``SEED_MAX`` (so the browser enforces them too) and
``datasets.services`` checks a dataset's settings with :func:`check_split_settings`.
"""

import numpy as np

from datasets.ingest.errors import DatasetError

#: Share of rows held out as the test split. Closed bounds, so the browser's min/max say
#: exactly the same: at least 1% is held out, at most 90%, so both splits have rows to use.
TEST_RATIO_MIN = 0.01
TEST_RATIO_MAX = 0.9
#: Seeds are stored in a 32-bit column: 0..2**31-1.
SEED_MAX = 2**31 - 1


def check_test_ratio(test_ratio: float) -> None:
    """DatasetError unless ``test_ratio`` is within ``TEST_RATIO_MIN..TEST_RATIO_MAX``."""
    if not TEST_RATIO_MIN <= float(test_ratio) <= TEST_RATIO_MAX:
        raise DatasetError(
            f"The test ratio must be between {TEST_RATIO_MIN} and {TEST_RATIO_MAX} "
            "(e.g. 0.2 for 20%)."
        )


def check_split_settings(test_ratio: float, seed: int) -> None:
    """DatasetError unless the ratio and seed are within the limits above."""
    check_test_ratio(test_ratio)
    if not 0 <= int(seed) <= SEED_MAX:
        raise DatasetError(f"The seed must be a whole number from 0 to {SEED_MAX}.")


def count_test_rows(row_count: int, test_ratio: float) -> int:
    """Rows in the test split: rounded, and at least one row in each split."""
    check_test_ratio(test_ratio)
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


def stratified_split_mask(labels: list, test_ratio: float, seed: int) -> np.ndarray:
    """Like :func:`split_mask`, but each label keeps its share in both splits.

    The test split has the same size as the plain split's (``count_test_rows``); it is shared
    out between the labels in proportion to their counts (largest remainder, ties to the label
    seen first), and each label's test rows are drawn from a permutation seeded by ``seed``.
    The same (labels, ratio, seed) always gives the same split.

    Args:
        labels: one hashable value per row, in file order (e.g. each row's ``label``).
        test_ratio: share of rows held out, within ``TEST_RATIO_MIN..TEST_RATIO_MAX``.
        seed: the split's seed.

    Returns:
        Boolean array, True where row i belongs to the test split.
    """
    size = count_test_rows(len(labels), test_ratio)
    groups: dict = {}
    for index, label in enumerate(labels):
        groups.setdefault(label, []).append(index)
    share = size / len(labels)
    quotas = {label: int(len(rows) * share) for label, rows in groups.items()}
    remainders = sorted(
        groups, key=lambda label: -(len(groups[label]) * share - quotas[label])
    )  # stable: ties keep first-seen order
    for label in remainders[: size - sum(quotas.values())]:
        quotas[label] += 1
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(labels), dtype=bool)
    for label, rows in groups.items():
        chosen = rng.permutation(len(rows))[: quotas[label]]
        mask[np.asarray(rows)[chosen]] = True
    return mask
