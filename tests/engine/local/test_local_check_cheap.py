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


BUILD_THEN_REACH = """
import sys
from training.engine.language_models import offline
offline.register_module("trainboard_local")
import training.engine as synalinks
language_model = synalinks.LanguageModel(model="local/smollm2")
synalinks.EmbeddingModel(model="local/minilm")
schema = language_model.supports_response_schema()  # what a forecast of its prompts asks
built = "litellm" in sys.modules
from training.engine.language_models.litellm_loader import get_litellm
litellm = get_litellm()
known = any(item.get("provider") == "local" for item in litellm.custom_provider_map)
print(built, schema, known, litellm.supports_response_schema("local/smollm2"))
"""


SCORE_FIRST = """
import sys
from training.engine.language_models import offline
offline.register_module("trainboard_local")
from training.engine.language_models.label_scoring import registered_scorer
print(registered_scorer("local/smollm2") is not None, "litellm" in sys.modules)
"""


def _printed(code: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()


def test_building_local_models_leaves_litellm_unloaded_and_the_first_request_registers_them():
    """A process that builds a local program it never calls (a migration's demo program, a
    page showing the program or forecasting its prompts) pays no litellm import, and learns
    what litellm will say of its response format; whatever reaches litellm first adds the
    local provider to it, so the first request finds it."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("sentence_transformers")
    assert _printed(BUILD_THEN_REACH) == ["False", "True", "True", "True"]


def test_a_local_models_label_scorer_is_there_before_anything_reached_litellm():
    """Scoring a local model's labels looks its scorer up first: the lookup registers the
    provider (and litellm with it) in a process that made no request yet."""
    pytest.importorskip("llama_cpp")
    assert _printed(SCORE_FIRST) == ["True", "True"]
