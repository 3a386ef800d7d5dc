"""Built-in datasets (``synalinks.datasets.gsm8k.load_data()``)."""

from training.engine.datasets import gsm8k

__all__ = ["gsm8k"]
