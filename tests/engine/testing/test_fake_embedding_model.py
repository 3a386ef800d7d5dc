"""The scripted embedding model answers without litellm: a process that embeds with it (a
test stack's web process drawing a run's candidate map, its worker's OMEGA run) never pays
litellm's import, seconds of CPU."""

import subprocess
import sys

EMBED = """
import asyncio, sys
from training.engine.testing.fake_embedding_model import FakeEmbeddingModel
from training.engine.language_models.budget import CallBudget
model = FakeEmbeddingModel(dimensions=8)
with CallBudget(cost=1.0).applied():  # a capped embedding reserves its cost bound first
    vectors = asyncio.run(model(["a parcel came late", "a parcel came"]))
print(len(vectors), len(vectors[0]), "litellm" in sys.modules)
"""


def test_a_fake_embedding_imports_no_litellm():
    printed = subprocess.run(
        [sys.executable, "-c", EMBED], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert printed == ["2", "8", "False"]
