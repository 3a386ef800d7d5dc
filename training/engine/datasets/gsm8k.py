"""GSM8K (grade-school math word problems) as ``((x_train, y_train), (x_test, y_test))``.

A 300/100-row sample ships with the project (``data/gsm8k``, MIT, OpenAI) so
everything works offline. ``load_data(sample=False)`` — or the environment
variable ``TRAINBOARD_GSM8K_FULL=1`` — loads the full dataset from
github.com/openai/grade-school-math instead, cached on disk; when it cannot be
downloaded we warn and fall back to the sample.

The DataModels mirror Synalinks': the input is a ``MathQuestion`` (``question``)
and the target a ``NumericalAnswerWithThinking`` (``thinking``: the worked
solution, ``answer``: the number after ``####``, as a float so that ``18`` and
``18.0`` compare equal). ``GSM8KQuery`` / ``GSM8KAnswer`` are aliases.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
import warnings
from pathlib import Path

import numpy as np
from pydantic import Field

from training.engine.data_model import DataModel

__all__ = [
    "GSM8KAnswer",
    "GSM8KQuery",
    "MathQuestion",
    "NumericalAnswerWithThinking",
    "get_input_data_model",
    "get_output_data_model",
    "load_data",
    "parse_row",
]

SOURCE_URL = (
    "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/"
)
SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "gsm8k"
SPLITS = ("train", "test")
FULL_ROWS = {"train": 7473, "test": 1319}
MAX_DOWNLOAD_BYTES = 50 * 1024 * 1024  # the real files are ~4 MB and ~0.7 MB
_CALCULATOR = re.compile(r"<<[^<>]*>>")


class MathQuestion(DataModel):
    """A GSM8K math word problem."""

    question: str = Field(description="The math word problem")


class NumericalAnswerWithThinking(DataModel):
    """A worked solution and its final numerical answer."""

    thinking: str = Field(description="Your step by step thinking")
    answer: float = Field(description="The numerical answer")


GSM8KQuery = MathQuestion
GSM8KAnswer = NumericalAnswerWithThinking


def get_input_data_model() -> type[DataModel]:
    return MathQuestion


def get_output_data_model() -> type[DataModel]:
    return NumericalAnswerWithThinking


def parse_row(row: dict, where: str = "row") -> tuple[MathQuestion, NumericalAnswerWithThinking]:
    """One ``{"question", "answer"}`` row → (input, target).

    The solution's calculator annotations (``<<48/2=24>>``) are dropped from
    ``thinking``; the final answer is the number after ``####`` (commas removed).
    """
    if not isinstance(row, dict) or not isinstance(row.get("question"), str):
        raise ValueError(f"GSM8K {where}: expected {{'question': str, 'answer': str}}")
    solution = row.get("answer")
    if not isinstance(solution, str) or "####" not in solution:
        raise ValueError(f"GSM8K {where}: the answer has no '#### <number>' final line")
    reasoning, _, final = solution.rpartition("####")
    text = final.strip().replace(",", "").replace("$", "")
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"GSM8K {where}: final answer {final.strip()!r} is not a number") from None
    return (
        MathQuestion(question=row["question"].strip()),
        NumericalAnswerWithThinking(thinking=_CALCULATOR.sub("", reasoning).strip(), answer=number),
    )


def _parse_lines(lines: list[str], source: str) -> tuple[np.ndarray, np.ndarray]:
    inputs, targets = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"GSM8K {source} line {number}: invalid JSON ({exc.msg})") from None
        x, y = parse_row(row, f"{source} line {number}")
        inputs.append(x)
        targets.append(y)
    if not inputs:
        raise ValueError(f"GSM8K {source}: no rows")
    return np.array(inputs, dtype="object"), np.array(targets, dtype="object")


def _read_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    path = folder / f"{split}.jsonl"
    return _parse_lines(path.read_text(encoding="utf-8").splitlines(), str(path))


def _default_cache_dir() -> Path:
    root = os.environ.get("TRAINBOARD_DATA_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "trainboard"
    )
    return Path(root) / "gsm8k"


def _download(split: str, folder: Path, timeout: float) -> None:
    """Fetch one full split into ``folder`` (validated before it replaces anything)."""
    url = f"{SOURCE_URL}{split}.jsonl"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (fixed https URL)
        payload = response.read(MAX_DOWNLOAD_BYTES + 1)
    if len(payload) > MAX_DOWNLOAD_BYTES:
        raise ValueError(f"{url} is larger than {MAX_DOWNLOAD_BYTES} bytes")
    text = payload.decode("utf-8")
    _parse_lines(text.splitlines(), url)  # refuse anything that is not GSM8K
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{split}.jsonl.part"
    partial.write_text(text, encoding="utf-8")
    partial.replace(folder / f"{split}.jsonl")


def _full_dataset(cache_dir: Path, timeout: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    data = {}
    for split in SPLITS:
        if not (cache_dir / f"{split}.jsonl").exists():
            _download(split, cache_dir, timeout)
        data[split] = _read_split(cache_dir, split)
    return data


def _want_sample(sample: bool | None) -> bool:
    if sample is not None:
        return bool(sample)
    return os.environ.get("TRAINBOARD_GSM8K_FULL", "").strip().lower() not in ("1", "true", "yes")


def load_data(
    sample: bool | None = None,
    timeout: float = 30.0,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Load GSM8K as numpy object arrays of DataModels.

    Args:
        sample: ``True`` for the shipped 300/100-row sample, ``False`` for the
            full dataset; ``None`` (default) reads ``TRAINBOARD_GSM8K_FULL``
            (sample unless it is ``1``/``true``/``yes``).
        timeout: seconds allowed for each download request.
        cache_dir: where the full files are kept (default
            ``$TRAINBOARD_DATA_CACHE/gsm8k`` or ``~/.cache/trainboard/gsm8k``).

    Returns:
        ``((x_train, y_train), (x_test, y_test))``: ``MathQuestion`` inputs and
        ``NumericalAnswerWithThinking`` targets.
    """
    folder = SAMPLE_DIR
    if not _want_sample(sample):
        cache = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
        try:
            data = _full_dataset(cache, timeout)
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            warnings.warn(
                f"GSM8K: could not load the full dataset from {SOURCE_URL} "
                f"({type(exc).__name__}: {exc}); using the shipped sample "
                "(300 train / 100 test rows) instead.",
                RuntimeWarning,
                stacklevel=2,
            )
        else:
            return data["train"], data["test"]
    return _read_split(folder, "train"), _read_split(folder, "test")
