"""Test doubles: scripted fake language and embedding models (no network, deterministic)."""

from training.engine.testing.fake_embedding_model import FakeEmbeddingModel, hashed_vector
from training.engine.testing.fake_language_model import FakeLanguageModel, FakeRequest

__all__ = ["FakeEmbeddingModel", "FakeLanguageModel", "FakeRequest", "hashed_vector"]
