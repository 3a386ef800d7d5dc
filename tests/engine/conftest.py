"""Fixtures the engine's tests share."""

from __future__ import annotations

import pytest

from training.engine.language_models.litellm_loader import get_litellm


@pytest.fixture(scope="session")
def litellm():
    """litellm as the engine loads it (``get_litellm``), imported when a test first asks for
    it: imported by a test module itself, it would cost every test process about five
    CPU-seconds while collecting, whether or not that process runs one of its tests."""
    return get_litellm()
