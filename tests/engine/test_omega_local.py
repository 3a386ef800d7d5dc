"""A short real OMEGA fit with the offline models (`local/smollm2` + `local/minilm`)."""

import numpy as np
import pytest

import training.engine as synalinks
from training.engine.optimizers import OMEGA

pytestmark = pytest.mark.slow

ROWS = [
    ("I loved this film, the acting was wonderful.", "positive"),
    ("Terrible plot and painfully boring scenes.", "negative"),
    ("A delightful, charming little story.", "positive"),
    ("The worst meal I have ever eaten.", "negative"),
    ("Great service and friendly staff.", "positive"),
    ("The product broke after one day, awful.", "negative"),
]


class Review(synalinks.DataModel):
    review: str


class Sentiment(synalinks.DataModel):
    label: str


class Recorder(synalinks.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.events = []

    async def on_event(self, event):
        self.events.append(event)


async def test_short_local_fit_end_to_end():
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=200)
    em = synalinks.EmbeddingModel(model="local/minilm")
    inputs = synalinks.Input(data_model=Review)
    outputs = await synalinks.Generator(data_model=Sentiment, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="local_omega")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["label"]),
        optimizer=OMEGA(
            language_model=lm,
            embedding_model=em,
            few_shot_learning=True,
            nb_max_examples=2,
            population_size=4,
            seed=0,
        ),
    )
    x = np.array([Review(review=r) for r, _ in ROWS], dtype="object")
    y = np.array([Sentiment(label=label) for _, label in ROWS], dtype="object")
    recorder = Recorder()
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
