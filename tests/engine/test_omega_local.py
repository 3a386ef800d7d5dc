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
    # temperature 0 and seed 0 throughout: the run repeats exactly (checked twice on the
    # same machine), so its course is stated as it is, event by event.
    assert history.history == {"reward": [0.0, 1.0], "val_reward": [1.0, 1.0]}
    candidates = [
        (e["candidate_id"], e["operation"], e["status"], e["reward"])
        for e in recorder.events
        if e["type"] == "candidate"
    ]
    assert candidates == [
        ("c1", "seed", "scored", 0.0),
        ("c2", "mutation", "scored", 1.0),  # epoch 0: a candidate per batch
        ("c3", "mutation", "scored", 1.0),
        ("c1", "seed", "dropped", 0.0),  # epoch 0's end: the DNS competition
        ("c2", "mutation", "kept", 1.0),
        ("c3", "mutation", "kept", 1.0),
        ("c4", "mutation", "scored", 1.0),  # epoch 1
        ("c5", "mutation", "scored", 1.0),
        ("c2", "mutation", "kept", 1.0),  # epoch 1's end: population_size 4 kept
        ("c3", "mutation", "kept", 1.0),
        ("c4", "mutation", "kept", 1.0),
        ("c5", "mutation", "kept", 1.0),
        ("c2", "mutation", "best", 1.0),
    ]
    assert [e for e in recorder.events if e["type"] == "optimizer_error"] == []
    # every LM call of the run (predictions, candidates' scoring, the 4 mutations) and the
    # embeddings of the two competitions
    assert usage.by_model["local/smollm2"]["calls"] == 22
    assert usage.embedding_calls == 2
    variable = program.trainable_variables[0]
    variable.assign(variable.value)  # still valid against its schema
