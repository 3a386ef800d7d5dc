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


# -- what a split can tell ----------------------------------------------------------------------

#: The difference a test split should be able to tell from noise when the data allows.
WANTED_GAIN = 0.10
#: The test shares a new dataset starts from: at least the usual 20%, more for a small file
#: (so its test split can tell what a run changed), never more than 40% (training needs rows).
SUGGESTED_RATIO_MIN = 0.2
SUGGESTED_RATIO_MAX = 0.4


def suggested_test_ratio(row_count: int) -> float:
    """The test share a new dataset of ``row_count`` rows starts with: enough rows to tell a
    difference of :data:`WANTED_GAIN` (``rows_to_detect``) where that is at most 40% of the
    rows, rounded up to 5%; the usual 20% for a large file."""
    from training.engine.utils.paired_bootstrap import rows_to_detect

    if row_count <= 0:
        return SUGGESTED_RATIO_MIN
    wanted = rows_to_detect(WANTED_GAIN) / row_count
    ratio = min(max(wanted, SUGGESTED_RATIO_MIN), SUGGESTED_RATIO_MAX)
    return round(-(-ratio * 20 // 1) / 20, 2)


def split_note(row_count: int, test_ratio: float) -> dict:
    """What a split of ``row_count`` rows at ``test_ratio`` can tell, for the page: the test
    rows, the smallest difference their paired 95% interval tells from noise, and the rows
    that would tell :data:`WANTED_GAIN` (``detectable_gain``, ``rows_to_detect``)."""
    from training.engine.utils.paired_bootstrap import detectable_gain, rows_to_detect

    test = count_test_rows(row_count, test_ratio) if row_count >= 2 else 0
    return {
        "test_rows": test,
        "train_rows": max(row_count - test, 0),
        "detectable": detectable_gain(test),
        "wanted_gain": WANTED_GAIN,
        "wanted_rows": rows_to_detect(WANTED_GAIN),
        "suggested_ratio": suggested_test_ratio(row_count),
    }


def training_order(labels: list, seed: int) -> list[int]:
    """The order ``fit`` receives a training split's rows in (positions into ``labels``, one
    label per row or None): a seeded interleave in which every label is spread evenly, so
    any tail — the validation split ``fit`` cuts off the end — holds each label in its share.

    Why: fit's validation split is the end of what it is given (the guide's and Keras's
    rule). Given in file order, a file sorted by label put one label in it, and candidates
    were chosen on rows that did not stand for the rest.
    """
    rng = np.random.default_rng(seed)
    groups: dict = {}
    for position, label in enumerate(labels):
        groups.setdefault(label, []).append(position)
    keyed = []
    for order, rows in enumerate(groups.values()):
        shuffled = [rows[i] for i in rng.permutation(len(rows))]
        offset = rng.random()
        keyed += [((rank + offset) / len(rows), order, row) for rank, row in enumerate(shuffled)]
    return [row for *_, row in sorted(keyed)]
