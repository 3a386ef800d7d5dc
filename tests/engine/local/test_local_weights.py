"""The local model runs the shipped GGUF converted to Q8_0, made once (``weights.py``)."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainboard_local import LocalModelError, smollm2, weights

llama_cpp = pytest.importorskip("llama_cpp")

BASE_DIR = Path(__file__).resolve().parents[3]
#: llama.cpp's ``LLAMA_FTYPE_MOSTLY_Q8_0`` as GGUF metadata writes it.
Q8_0_FILE_TYPE = str(llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(weights.CACHE_SETTING, str(tmp_path / "models"))
    monkeypatch.delenv(weights.WEIGHTS_SETTING, raising=False)
    return tmp_path / "models"


def file_type(path) -> str:
    llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        return llama.metadata["general.file_type"]
    finally:
        llama.close()


def test_the_model_runs_a_q8_0_conversion_of_the_shipped_weights(cache):
    path = smollm2.model_path()
    assert path.parent == cache
    assert path != smollm2.gguf_path()
    assert file_type(path) == Q8_0_FILE_TYPE
    assert file_type(smollm2.gguf_path()) != Q8_0_FILE_TYPE


def test_the_conversion_is_made_once_and_reused(cache):
    first = smollm2.model_path()
    made = first.stat().st_mtime_ns
    assert smollm2.model_path() == first
    assert first.stat().st_mtime_ns == made
    assert [p.name for p in cache.iterdir()] == [first.name]  # no temporary file left


def test_a_truncated_conversion_is_made_again(cache):
    path = smollm2.model_path()
    whole = path.stat().st_size
    path.write_bytes(path.read_bytes()[:4096])
    assert smollm2.model_path() == path
    assert path.stat().st_size == whole
    assert file_type(path) == Q8_0_FILE_TYPE


def test_an_unwritable_cache_runs_the_shipped_weights_and_says_why(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(weights.CACHE_SETTING, str(blocker / "models"))
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        assert smollm2.model_path() == smollm2.gguf_path()
    assert "running the shipped weights" in caplog.text


def test_the_shipped_setting_runs_the_shipped_weights(cache, monkeypatch):
    monkeypatch.setenv(weights.WEIGHTS_SETTING, "shipped")
    assert smollm2.model_path() == smollm2.gguf_path()
    assert not cache.exists()


def test_an_unknown_weights_setting_is_named(cache, monkeypatch):
    monkeypatch.setenv(weights.WEIGHTS_SETTING, "q2")
    with pytest.raises(
        LocalModelError, match="TRAINBOARD_LOCAL_LM_WEIGHTS must be 'q8_0' or 'shipped'"
    ):
        smollm2.model_path()


@pytest.fixture
def unloaded(monkeypatch):
    """No pool loaded yet in this process; the one the test loads is closed after it and the
    process-wide one (if an earlier test loaded it) comes back untouched."""
    monkeypatch.setattr(smollm2, "_pool", None)
    monkeypatch.setattr(smollm2, "_instances", [])
    monkeypatch.setenv("TRAINBOARD_LOCAL_LM_INSTANCES", "1")
    yield
    while smollm2._instances:
        smollm2._instances.pop().close()


def test_a_conversion_llama_cpp_cannot_load_is_made_again(cache, unloaded, caplog):
    path = smollm2.model_path()
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # still a GGUF header, still over 1 MiB
    assert weights.is_whole(path)
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        answer = smollm2.complete([{"role": "user", "content": "Say hi."}], max_tokens=4)
    assert answer["choices"][0]["message"]["content"]  # it loaded and answers
    assert path.stat().st_size == len(whole)
    assert file_type(path) == Q8_0_FILE_TYPE
    assert "making it again" in caplog.text
    assert [p.name for p in cache.iterdir()] == [path.name]


def test_weights_that_still_fail_are_tried_once_more_at_most(cache, monkeypatch):
    opened = []

    def unloadable(path):
        opened.append(path)
        raise ValueError("Failed to load model from file")

    shipped = smollm2.gguf_path()
    with pytest.raises(ValueError, match="Failed to load"):
        weights.open_weights(shipped, llama_cpp, unloadable)
    conversion = weights.converted_path(shipped, llama_cpp)
    assert opened == [conversion, conversion]  # made again once, then the error stands
    opened.clear()
    monkeypatch.setenv(weights.WEIGHTS_SETTING, "shipped")
    with pytest.raises(ValueError, match="Failed to load"):
        weights.open_weights(shipped, llama_cpp, unloadable)
    assert opened == [shipped]  # the shipped file is not converted again


def test_the_conversion_keeps_llama_cpps_progress_out_of_stderr(cache, capfd, caplog):
    before = log_callback()
    assert before is not None  # llama-cpp-python's, set when it was imported
    with caplog.at_level(logging.DEBUG, logger=weights.__name__):
        path = smollm2.model_path()
    assert path.parent == cache
    printed = capfd.readouterr().err
    assert "converting to q8_0" not in printed and "llama_model_loader" not in printed
    assert "converting to q8_0" in caplog.text  # at debug level, for who asks
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}
    assert log_callback() == before  # and llama.cpp's log goes where it went before


def log_callback() -> int | None:
    callback, user_data = llama_cpp.llama_log_callback(), ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(callback), ctypes.byref(user_data))
    return ctypes.cast(callback, ctypes.c_void_p).value


def test_a_failed_conversion_still_says_why(cache, tmp_path, capfd, caplog):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(weights.GGUF_MAGIC + bytes(4096))
    with caplog.at_level(logging.WARNING, logger=weights.__name__):
        assert weights.runtime_weights(broken, llama_cpp) == broken
    assert "running the shipped weights" in caplog.text
    assert "llama.cpp: llama_model_quantize: failed to quantize" in caplog.text
    assert "failed to quantize" not in capfd.readouterr().err


def convert_now(environ: dict) -> subprocess.CompletedProcess:
    """``python -m trainboard_local.prepare_weights``, what ``make setup`` runs after an install."""
    env = {k: v for k, v in os.environ.items() if k != weights.WEIGHTS_SETTING}
    return subprocess.run(
        [sys.executable, "-m", "trainboard_local.prepare_weights"],
        cwd=BASE_DIR,
        env={**env, **environ},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_entry_point_makes_the_conversion_quietly(cache):
    done = convert_now({weights.CACHE_SETTING: str(cache)})
    assert done.returncode == 0, done.stderr
    (made,) = cache.iterdir()
    assert done.stdout == f"local model: runs {made}\n"
    assert "converting to q8_0" not in done.stderr and "llama_model_loader" not in done.stderr
    assert file_type(made) == Q8_0_FILE_TYPE


def test_the_entry_point_says_why_it_could_not_convert(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = convert_now({weights.CACHE_SETTING: str(blocker / "models")})
    assert done.returncode == 1
    assert "running the shipped weights" in done.stderr
