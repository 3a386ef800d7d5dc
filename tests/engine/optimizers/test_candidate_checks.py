"""Junk rules (``optimizers/candidate_checks.py``): each rule on its own, then OMEGA refusing
what they catch before it is scored (a ``candidate_refused`` event, counted by rule)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.optimizers import candidate_checks as checks
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

PARENT = "Classify the sentiment of the tweet. Answer with one of the labels."
LABELS = ["negative", "neutral", "positive"]


def test_empty_text_is_refused():
    assert checks.text_refusal("   \n", [PARENT]) == "empty"


def test_punctuation_only_is_refused():
    assert checks.text_refusal('", "', [PARENT]) == "punctuation"
    assert checks.text_refusal("...", [PARENT]) == "punctuation"


def test_much_shorter_than_the_parent_is_refused_but_a_short_parent_may_shrink():
    assert checks.text_refusal("Classify.", [PARENT]) == "shorter"
    assert checks.text_refusal("Be brief.", ["Be brief, please."]) is None  # parent < 20 chars
    # a mutation that cut the default instruction down to two words
    assert checks.text_refusal("The task", ["Classify the sentiment of the tweet."]) == "shorter"
    # a crossover is compared with its shorter parent
    assert checks.text_refusal("Classify the tweet's sentiment.", [PARENT, "Be precise."]) is None


def test_a_text_that_repeats_itself_is_refused():
    assert checks.text_refusal("Label the tweet. Label the tweet.", [PARENT]) == "repeats"
    assert checks.text_refusal("positive positive positive positive", [PARENT]) == "repeats"
    assert (
        checks.text_refusal(
            "Use the label of the tweet, use the label of the text, use the label of it",
            [PARENT],
        )
        == "repeats"
    )
    assert checks.text_refusal("Say what the tweet feels. Then say the label.", [PARENT]) is None
    # A list of rules opens each of its sentences alike: that is structure, not a loop.
    rules = "\n".join(
        f'When you see "{word}", answer team={team}.'
        for word, team in (("refund", "billing"), ("login", "accounts"), ("crash", "tech"))
    )
    assert checks.text_refusal(rules, [PARENT]) is None


def test_labels_outside_the_label_set_are_refused_on_a_label_task_only():
    invented = "Answer one of: happy, sad, angry, positive."
    assert checks.text_refusal(invented, [PARENT], LABELS) == "unknown_labels"
    assert checks.unknown_labels(invented, LABELS) == ["happy", "sad", "angry"]
    assert checks.unknown_labels('Say "positive" or "joyful".', LABELS) == ["joyful"]
    assert checks.text_refusal(invented, [PARENT], None) is None  # no label set: no rule
    for fine in (
        "Classify the sentiment of the tweet as negative, neutral or positive.",
        "Respond with positive, negative, or neutral, and nothing else.",
        'The label must be exactly one of: "negative", "neutral", "positive".',
    ):
        assert checks.text_refusal(fine, [PARENT], LABELS) is None, fine


def test_the_parents_text_unchanged_is_refused_whitespace_aside():
    assert checks.text_refusal(f"  {PARENT} ", [PARENT]) == "unchanged"
    assert checks.refusal({"instructions": PARENT}, [{"instructions": PARENT}]).rule == "unchanged"
    # a parent given back is "unchanged" even when the parent itself was empty
    assert checks.refusal({"instructions": ""}, [{"instructions": ""}]).rule == "unchanged"


def test_refusal_names_the_rule_its_reason_and_the_field():
    refused = checks.refusal({"instructions": ", "}, [{"instructions": PARENT}], LABELS)
    assert refused.to_dict() == {
        "rule": "punctuation",
        "reason": "the text is punctuation only",
        "field": "instructions",
    }
    assert (
        checks.refusal({"instructions": PARENT + " Be brief."}, [{"instructions": PARENT}]) is None
    )
    assert set(checks.REASONS) == {
        "empty",
        "punctuation",
        "shorter",
        "repeats",
        "unknown_labels",
        "unchanged",
    }


# -- OMEGA refuses them before scoring --------------------------------------------------------
class Tweet(synalinks.DataModel):
    text: str


class Sentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"]


ROWS = [
    ("I love it", "positive"),
    ("I hate it", "negative"),
    ("It is a chair", "neutral"),
    ("So good", "positive"),
    ("So bad", "negative"),
    ("A table", "neutral"),
    ("Great day", "positive"),
    ("Awful day", "negative"),
]
GOOD = "Classify the sentiment of the tweet as negative, neutral or positive."
JUNK = [
    ", ",
    "Label it. Label it. Label it.",
    "Answer happy, sad or positive.",
    "No.",
]


def scripted_mutations(script):
    calls = {"n": 0}

    def respond(request):
        text = script[calls["n"] % len(script)]
        calls["n"] += 1
        return {"thinking": "try this", "instructions": text}

    return FakeLanguageModel(responder=respond)


def labeller():
    """Right only when the instructions name all three labels."""

    def respond(request):
        if all(label in request.instructions for label in ("negative", "neutral", "positive")):
            text = request.inputs["text"].lower()
            if any(w in text for w in ("love", "good", "great")):
                return {"label": "positive"}
            if any(w in text for w in ("hate", "bad", "awful")):
                return {"label": "negative"}
        return {"label": "neutral"}

    return FakeLanguageModel(responder=respond)


@pytest.mark.parametrize("few_shot_learning", [False, True])
async def test_omega_never_scores_or_keeps_a_junk_candidate(few_shot_learning):
    optimizer = OMEGA(
        language_model=scripted_mutations([*JUNK, GOOD]),
        embedding_model=FakeEmbeddingModel(),
        few_shot_learning=few_shot_learning,
        seed=0,
    )
    inputs = synalinks.Input(data_model=Tweet)
    outputs = await synalinks.Generator(
        data_model=Sentiment,
        language_model=labeller(),
        instructions="Classify the sentiment of the tweet, one word.",
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["label"]), optimizer=optimizer)
    x = np.array([Tweet(text=t) for t, _ in ROWS], dtype="object")
    y = np.array([Sentiment(label=label) for _, label in ROWS], dtype="object")
    recorder = EventRecorder()
    await program.fit(x, y, epochs=1, batch_size=1, seed=0, callbacks=[recorder])
    refused = recorder.of("candidate_refused")
    assert [e["rule"] for e in refused[:4]] == [
        "punctuation",
        "repeats",
        "unknown_labels",
        "shorter",
    ]
    assert refused[0]["text"] == ", " and refused[0]["operation"] == "mutation"
    assert refused[0]["reason"] == "the text is punctuation only"
    assert sum(optimizer.refusals.values()) == len(refused) >= 4
    values = [e["value"]["instructions"] for e in recorder.of("candidate")]
    assert not any(junk in values for junk in JUNK)  # never scored, never kept
    assert program.trainable_variables[0].value["instructions"] == GOOD
    assert optimizer.get_state()["refusals"] == optimizer.refusals
