"""The scripted ``fake/…`` models exist only under the test settings.

Production (``project.settings``, what ``make run`` starts) resolves no ``fake/`` model,
loads nothing from tests/, and no production module imports the engine's test fakes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from training.programs.lm import ModelStringError, make_language_model

BASE_DIR = Path(__file__).resolve().parents[3]
PRODUCTION_PACKAGES = ("core", "datasets", "project", "training", "scripts")
TEST_CODE_IMPORT = re.compile(
    r"^\s*(from|import)\s+(tests\b|training\.engine\.testing\b)|synalinks\.testing\b", re.M
)

PRODUCTION_PROCESS = """
import sys
import django
django.setup()
import project.asgi, project.celery, training.execution.tasks, training.runs.views.runs, training.insight.views.run_page  # everything a process loads
from training.programs.lm import ModelStringError, make_embedding_model, make_language_model
for make, model in ((make_language_model, "fake/fewshot"), (make_embedding_model, "fake/embedding")):
    try:
        make(model)
    except ModelStringError as exc:
        print("refused:", exc)
print("tests loaded:", sorted(name for name in sys.modules if name.split(".")[0] == "tests"))
"""


def test_production_settings_refuse_fake_models_and_load_nothing_from_tests(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="project.settings", TRAINBOARD_VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", PRODUCTION_PROCESS],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines == [
        "refused: model 'fake/fewshot': unknown provider 'fake'. Use local/smollm2 (offline) or "
        "a litellm provider such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
        "ollama/llama3, hosted_vllm/<model> (with an API base)",
        "refused: embedding model 'fake/embedding': unknown provider 'fake'. Use local/smollm2 "
        "(offline) or a litellm provider such as openai/gpt-4o-mini, "
        "anthropic/claude-3-5-haiku-latest, ollama/llama3, hosted_vllm/<model> (with an API base)",
        "tests loaded: []",
    ]


def test_no_production_module_imports_the_engine_test_fakes():
    offenders = []
    for package in PRODUCTION_PACKAGES:
        for path in (BASE_DIR / package).rglob("*.py"):
            if path.is_relative_to(BASE_DIR / "training" / "engine"):
                continue  # the engine's own package exports its testing module
            if TEST_CODE_IMPORT.search(path.read_text()):
                offenders.append(str(path.relative_to(BASE_DIR)))
    assert offenders == []


def test_the_test_settings_resolve_fake_models():
    assert make_language_model("fake/fewshot").model == "fake/fewshot"
    with pytest.raises(ModelStringError, match="unknown fake model 'nonsense'"):
        make_language_model("fake/nonsense")
