"""The local model runs the shipped GGUF converted to Q8_0, made once (``weights.py``)."""

from __future__ import annotations

import logging

import pytest

from training.engine.local import LocalModelError, smollm2, weights

llama_cpp = pytest.importorskip("llama_cpp")

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
