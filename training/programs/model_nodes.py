"""The language and embedding models inside a serialised engine program.

One walk over a document that the program checks (``programs.sanitize_engine_json``) and
the saved endpoints (``saved_endpoints.connect``) both use, in a module of its own so neither
imports the other for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import training.engine as synalinks
from training.engine.saving import get_registered_object

#: Keys under which a document holds a model whose class is not registered here.
MODEL_KEYS = ("language_model", "embedding_model")


def model_kind(key: Any, value: Any) -> str | None:
    """Which kind of model a serialised object (``{"class_name", "config"}``) is, if any."""
    if not isinstance(value, dict) or not isinstance(value.get("config"), dict):
        return None
    try:
        cls = get_registered_object(str(value.get("class_name", "")))
    except Exception:  # unknown names fail later, in from_config, with the engine's message
        cls = None
    if isinstance(cls, type) and issubclass(cls, synalinks.LanguageModel):
        return "language_model"
    if isinstance(cls, type) and issubclass(cls, synalinks.EmbeddingModel):
        return "embedding_model"
    return key if key in MODEL_KEYS else None


def model_nodes(document: Any, key: Any = None) -> Iterator[tuple[str, dict]]:
    """Every serialised language or embedding model (``{"class_name", "config"}``) anywhere
    in an engine document, with its kind, parents before children. A caller may change a
    yielded node's ``config`` in place before asking for the next."""
    if isinstance(document, dict):
        kind = model_kind(key, document)
        if kind:
            yield kind, document
        for child_key, child in document.items():
            yield from model_nodes(child, child_key)
    elif isinstance(document, list):
        for child in document:
            yield from model_nodes(child, key)
