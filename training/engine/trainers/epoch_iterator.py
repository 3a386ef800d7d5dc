"""EpochIterator: the batches of one epoch, in a reproducible order (as Keras' EpochIterator)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np


class EpochIterator:
    """Cuts the training examples into batches, shuffled per epoch from ``(seed, epoch)``.

    The same seed gives the same order in every run, and resuming at ``initial_epoch`` sees the
    batches a full run would have seen.

    Args:
        x: the training inputs (one item per example).
        y: the targets, aligned with ``x``.
        batch_size: examples per batch (the last batch may be smaller).
        shuffle: whether each epoch visits the examples in a new order.
        seed: the seed of the shuffles.

    Example:

    ```python
    iterator = EpochIterator(x, y, batch_size=4, shuffle=True, seed=1)
    for batch, batch_x, batch_y in iterator.batches(epoch=0):
        ...
    ```
    """

    def __init__(self, x: list, y: list, batch_size: int, shuffle: bool, seed: int) -> None:
        self.x = x
        self.y = y
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.steps = math.ceil(len(x) / batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The positions of the examples in the order ``epoch`` visits them."""
        if not self.shuffle:
            return np.arange(len(self.x))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.x))

    def batch_indices(self, epoch: int, batch: int) -> list[int]:
        """The positions (in ``x``) of the examples of one batch (what traces refer to)."""
        index = self.order(epoch)[batch * self.batch_size : (batch + 1) * self.batch_size]
        return [int(i) for i in index]

    def batches(self, epoch: int) -> Iterator[tuple[int, list, list]]:
        """Yield ``(batch index, inputs, targets)`` for each batch of ``epoch``."""
        order = self.order(epoch)
        for batch in range(self.steps):
            index = order[batch * self.batch_size : (batch + 1) * self.batch_size]
            yield batch, [self.x[i] for i in index], [self.y[i] for i in index]
