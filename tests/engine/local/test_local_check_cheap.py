"""Checking that a local model can run imports nothing heavy: the launch form builds the
program (an OMEGA form: its ``local/minilm`` embedding model) to forecast it, in the web
process, and must answer at once (it took 6-8 s when the check imported torch)."""

import subprocess
import sys

import pytest

PROBE = """
import time
started = time.perf_counter()
import trainboard_local as local
local.check_available("local/minilm")
import sys
print("sentence_transformers" in sys.modules, "torch" in sys.modules, time.perf_counter() - started)
"""


def test_the_embedding_model_check_imports_neither_sentence_transformers_nor_torch():
    pytest.importorskip("sentence_transformers")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out[:2] == ["False", "False"], out
