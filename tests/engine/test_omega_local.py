"""A short real OMEGA fit with the offline models (`local/smollm2` + `local/minilm`)."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.testing.tasks import sentiment_arrays, sentiment_program

pytestmark = pytest.mark.slow

ROWS = [
    ("I loved this film, the acting was wonderful.", "positive"),
    ("Terrible plot and painfully boring scenes.", "negative"),
    ("A delightful, charming little story.", "positive"),
    ("The worst meal I have ever eaten.", "negative"),
    ("Great service and friendly staff.", "positive"),
    ("The product broke after one day, awful.", "negative"),
]


async def test_short_local_fit_end_to_end():
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=200)
    em = synalinks.EmbeddingModel(model="local/minilm")
    program = await sentiment_program(
        lm,
        OMEGA(
            language_model=lm,
            embedding_model=em,
            few_shot_learning=True,
            nb_max_examples=2,
            population_size=4,
            seed=0,
        ),
        instructions=None,
        name="local_omega",
    )
    x, y = sentiment_arrays(ROWS)
    recorder = EventRecorder()
    with synalinks.usage.track() as usage:
        history = await program.fit(
            x, y, validation_split=0.34, epochs=2, batch_size=2, seed=0, callbacks=[recorder]
        )
    assert len(history.history["val_reward"]) == 2
    candidates = [e for e in recorder.events if e["type"] == "candidate"]
    errors = [e for e in recorder.events if e["type"] == "optimizer_error"]
    seed = next(e for e in candidates if e["operation"] == "seed" and e["status"] == "scored")
    best = [e for e in candidates if e["status"] == "best"]
    assert len(best) == 1 and best[0]["reward"] >= seed["reward"]  # never worse than the start
    made = {e["candidate_id"] for e in candidates if e["operation"] != "seed"}
    assert made or errors  # each of the 4 batches made a candidate, or reported why not
    assert usage.by_model["local/smollm2"]["calls"] > 4 + 2 * 2  # predictions + the optimizer's
    if len([e for e in candidates if e["status"] in ("kept", "dropped")]) > 1:
        assert usage.embedding_calls >= 1
    variable = program.trainable_variables[0]
    variable.assign(variable.value)  # still valid against its schema
