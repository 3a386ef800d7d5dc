"""Balanced few-shot examples: on a label set, RandomFewShot and OMEGA draw examples that
cover the labels (stratified), seeded; without a label set the draw stays plain random."""

from __future__ import annotations

import random
from typing import Literal

import numpy as np

import training.engine as synalinks
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA, RandomFewShot, label_balance
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


class Tweet(synalinks.DataModel):
    text: str


class Sentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"]


class FreeSentiment(synalinks.DataModel):
    label: str


# Skewed like real data: mostly positive.
ROWS = [(f"good thing {i}", "positive") for i in range(9)] + [
    ("bad thing", "negative"),
    ("awful thing", "negative"),
    ("a thing", "neutral"),
]


def test_balanced_indices_cover_every_label_before_one_repeats():
    labels = ["a"] * 6 + ["b", "c"]
    for seed in range(20):
        picked = label_balance.balanced_indices(labels, 3, random.Random(seed))
        assert sorted(labels[i] for i in picked) == ["a", "b", "c"]
        five = label_balance.balanced_indices(labels, 5, random.Random(seed))
        assert len(set(five)) == 5 and {labels[i] for i in five} == {"a", "b", "c"}
    assert label_balance.balanced_indices(labels, 3, random.Random(4)) == (
        label_balance.balanced_indices(labels, 3, random.Random(4))
    )
    # more than the pool: all of it; the pick function chooses within a label
    assert sorted(label_balance.balanced_indices(labels, 99, random.Random(0))) == list(range(8))
    # with a pick that always takes a label's first remaining index, the draw is each label's
    # indices in order, the labels in the order the seeded generator shuffles them into
    order = sorted(set(labels))
    random.Random(0).shuffle(order)
    first_of_each = [labels.index(label) for label in order]
    assert (
        label_balance.balanced_indices(labels, 3, random.Random(0), pick=lambda rest: 0)
        == first_of_each
    )
    all_eight = label_balance.balanced_indices(labels, 8, random.Random(0), pick=lambda rest: 0)
    assert all_eight[:3] == first_of_each
    assert [i for i in all_eight if labels[i] == "a"] == [0, 1, 2, 3, 4, 5]


def test_label_fields_are_the_literal_string_fields():
    assert label_balance.label_fields(Sentiment) == {"label": ["negative", "neutral", "positive"]}
    assert label_balance.label_fields(FreeSentiment) == {}


async def fit_with(optimizer, output=Sentiment):
    inputs = synalinks.Input(data_model=Tweet)
    outputs = await synalinks.Generator(
        data_model=output,
        language_model=FakeLanguageModel(responder=lambda r: {"label": "neutral"}),
        name="tagger",
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["label"]), optimizer=optimizer)
    x = np.array([Tweet(text=t) for t, _ in ROWS], dtype="object")
    y = np.array([output(label=label) for _, label in ROWS], dtype="object")
    recorder = EventRecorder()
    await program.fit(x, y, epochs=1, batch_size=4, seed=0, callbacks=[recorder])
    return recorder


def example_label_sets(recorder, operation):
    return [
        sorted(e["outputs"]["label"] for e in event["value"]["examples"])
        for event in recorder.of("candidate")
        if event["operation"] == operation and event["status"] == "scored"
    ]


async def test_random_few_shot_draws_cover_the_label_set():
    optimizer = RandomFewShot(nb_min_examples=3, nb_max_examples=3, nb_candidates=8, seed=0)
    sets = example_label_sets(await fit_with(optimizer), "few_shot")
    assert len(sets) == 8
    assert all(labels == ["negative", "neutral", "positive"] for labels in sets)


async def test_random_few_shot_without_a_label_set_samples_at_random():
    optimizer = RandomFewShot(nb_min_examples=3, nb_max_examples=3, nb_candidates=8, seed=0)
    sets = example_label_sets(await fit_with(optimizer, FreeSentiment), "few_shot")
    assert len(sets) == 8  # 9 of 12 rows are positive: seeded draws miss a label
    assert any(labels != ["negative", "neutral", "positive"] for labels in sets)


async def test_omega_few_shot_draws_cover_the_label_set():
    def mutate(request):
        mutate.n += 1
        return {"thinking": "more", "instructions": f"Label the tweet, try number {mutate.n}."}

    mutate.n = 0
    optimizer = OMEGA(
        language_model=FakeLanguageModel(responder=mutate),
        embedding_model=FakeEmbeddingModel(),
        few_shot_learning=True,
        nb_min_examples=2,
        nb_max_examples=2,
        seed=0,
    )
    recorder = await fit_with(optimizer)
    sets = [
        labels
        for operation in ("mutation", "few_shot", "crossover")
        for labels in example_label_sets(recorder, operation)
    ]
    assert sets
    assert all(len(set(labels)) == 2 for labels in sets)  # two examples, two labels
