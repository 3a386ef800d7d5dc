"""Same seed, same run: an OMEGA fit on the offline models, run twice with the
same program, data and seed, makes the same chat calls, gets the same answers, and ends with
the same candidates and rewards, whatever the instances held and however the calls were
scheduled: a seedless sampled call must not take its seed from whatever the instance
served before, or the mutations (and the number of chat calls) depend on the scheduling."""

import json

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import LOCAL_OMEGA_ROWS
from trainboard_local import smollm2
from training.engine.modules import module as module_names
from training.engine.optimizers import OMEGA
from training.engine.testing.tasks import sentiment_arrays, sentiment_program

pytestmark = pytest.mark.slow


async def _fit(monkeypatch) -> dict:
    calls: list[str] = []
    complete = smollm2.complete

    def recording(messages, **kwargs):
        result = complete(messages, **kwargs)
        answer = result["choices"][0]["message"]["content"]
        calls.append(json.dumps([messages, kwargs.get("temperature"), answer], sort_keys=True))
        return result

    monkeypatch.setattr(smollm2, "complete", recording)
    # as in a fresh process: the same program gets the same module names ("generator"), which
    # the mutation prompts quote
    monkeypatch.setattr(module_names, "_NAME_COUNTS", {})
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=120)
    em = synalinks.EmbeddingModel(model="local/minilm")
    optimizer = OMEGA(
        language_model=lm,
        embedding_model=em,
        few_shot_learning=True,
        nb_max_examples=2,
        population_size=3,
        seed=5,
    )
    program = await sentiment_program(lm, optimizer, instructions=None, name="determinism")
    x, y = sentiment_arrays(LOCAL_OMEGA_ROWS)
    history = await program.fit(x, y, validation_split=0.34, epochs=1, batch_size=2, seed=5)
    monkeypatch.setattr(smollm2, "complete", complete)
    candidates = [
        {key: c.get(key) for key in ("id", "operation", "value", "reward", "status")}
        for c in program.trainable_variables[0].candidates
    ]
    return {"calls": sorted(calls), "candidates": candidates, "history": history.history}


async def test_one_fit_twice_makes_the_same_calls_candidates_and_rewards(monkeypatch):
    first = await _fit(monkeypatch)
    # the instances now hold this fit's prompts; another prompt on one of them changes that
    smollm2.complete([{"role": "user", "content": "Say something else."}], max_tokens=4)
    again = await _fit(monkeypatch)
    assert len(again["calls"]) == len(first["calls"])
    assert again["calls"] == first["calls"]
    assert again["candidates"] == first["candidates"]
    assert again["history"] == first["history"]
    assert any(c["operation"] != "seed" for c in first["candidates"])  # OMEGA made candidates
