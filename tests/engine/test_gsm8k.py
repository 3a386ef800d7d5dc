"""GSM8K: the shipped sample, the full download path and its offline fallback."""

import json
import urllib.request

import numpy as np
import pytest

import training.engine as synalinks
from training.engine.datasets import gsm8k


def test_guide_snippet_loads_the_sample():
    (x_train, y_train), (x_test, y_test) = synalinks.datasets.gsm8k.load_data()
    assert x_train.shape == y_train.shape == (300,)
    assert x_test.shape == y_test.shape == (100,)
    assert x_train.dtype == object and y_test.dtype == object
    assert isinstance(x_train[0], gsm8k.MathQuestion)
    assert isinstance(y_train[0], gsm8k.NumericalAnswerWithThinking)
    assert x_train[0].question.startswith("Natalia sold clips to 48 of her friends")
    assert y_train[0].answer == 72.0
    assert "<<" not in y_train[0].thinking and "48/2 = 24" in y_train[0].thinking
    assert x_test[0].question.startswith("Janet’s ducks lay 16 eggs")
    assert y_test[0].answer == 18.0


def test_every_sample_row_has_a_numeric_answer_and_reasoning():
    (_, y_train), (_, y_test) = gsm8k.load_data(sample=True)
    for target in np.concatenate([y_train, y_test]):
        assert isinstance(target.answer, float)
        assert target.thinking


def test_data_models_mirror_synalinks():
    assert gsm8k.GSM8KQuery is gsm8k.MathQuestion is gsm8k.get_input_data_model()
    assert gsm8k.GSM8KAnswer is gsm8k.NumericalAnswerWithThinking is gsm8k.get_output_data_model()
    assert list(gsm8k.MathQuestion.model_fields) == ["question"]
    assert list(gsm8k.NumericalAnswerWithThinking.model_fields) == ["thinking", "answer"]
    assert gsm8k.GSM8KAnswer(thinking="t", answer="15").answer == 15.0  # LM text coerces


def test_sample_is_shipped_with_license_and_citation():
    folder = gsm8k.SAMPLE_DIR
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "Copyright (c) 2021 OpenAI" in (folder / "LICENSE").read_text()
    assert "github.com/openai/grade-school-math" in (folder / "README.md").read_text()


def test_parse_row():
    x, y = gsm8k.parse_row({"question": " Q? ", "answer": "a <<1+1=2>>2\nb\n#### 1,234"})
    assert x.question == "Q?" and y.answer == 1234.0 and y.thinking == "a 2\nb"
    with pytest.raises(ValueError, match="####"):
        gsm8k.parse_row({"question": "Q", "answer": "no final line"})
    with pytest.raises(ValueError, match="not a number"):
        gsm8k.parse_row({"question": "Q", "answer": "x #### many"})


def _write_full(folder, train_rows, test_rows):
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in (("train", train_rows), ("test", test_rows)):
        lines = [
            json.dumps({"question": f"{split} q{i}", "answer": f"step\n#### {i}"})
            for i in range(rows)
        ]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")


def _no_network(*args, **kwargs):
    raise OSError("network disabled in tests")


def test_full_dataset_comes_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    _write_full(tmp_path, 7, 3)
    (x_train, y_train), (x_test, _) = gsm8k.load_data(sample=False, cache_dir=tmp_path)
    assert x_train.shape == (7,) and x_test.shape == (3,)
    assert y_train[6].answer == 6.0


def test_no_network_falls_back_to_the_sample_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    with pytest.warns(RuntimeWarning, match="shipped sample"):
        (x_train, _), (x_test, _) = gsm8k.load_data(sample=False, cache_dir=tmp_path / "empty")
    assert x_train.shape == (300,) and x_test.shape == (100,)


def test_download_is_validated_and_cached(tmp_path, monkeypatch):
    requested = []

    class Response:
        def __init__(self, body):
            self.body = body

        def read(self, limit):
            return self.body[:limit]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fake_urlopen(url, timeout):
        requested.append((url, timeout))
        split = "train" if url.endswith("train.jsonl") else "test"
        line = json.dumps({"question": f"{split} question", "answer": "work\n#### 42"})
        return Response((line + "\n").encode())

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    (x_train, y_train), _ = gsm8k.load_data(sample=False, cache_dir=tmp_path, timeout=5)
    assert [url for url, _ in requested] == [
        gsm8k.SOURCE_URL + "train.jsonl",
        gsm8k.SOURCE_URL + "test.jsonl",
    ]
    assert all(timeout == 5 for _, timeout in requested)
    assert x_train[0].question == "train question" and y_train[0].answer == 42.0
    assert (tmp_path / "train.jsonl").exists() and not (tmp_path / "train.jsonl.part").exists()


def test_invalid_download_is_not_cached(tmp_path, monkeypatch):
    class Garbage:
        def read(self, limit):
            return b"<html>rate limited</html>"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: Garbage())
    with pytest.warns(RuntimeWarning, match="invalid JSON"):
        (x_train, _), _ = gsm8k.load_data(sample=False, cache_dir=tmp_path)
    assert x_train.shape == (300,)
    assert not (tmp_path / "train.jsonl").exists()


def test_environment_variable_selects_the_full_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    _write_full(tmp_path / "gsm8k", 5, 2)
    monkeypatch.setenv("TRAINBOARD_DATA_CACHE", str(tmp_path))
    monkeypatch.setenv("TRAINBOARD_GSM8K_FULL", "1")
    (x_train, _), _ = gsm8k.load_data()
    assert x_train.shape == (5,)
    monkeypatch.setenv("TRAINBOARD_GSM8K_FULL", "0")
    (x_train, _), _ = gsm8k.load_data()
    assert x_train.shape == (300,)
