"""HumanMarks: people's marks score the predictions they judged; the rest fall back to the
run's reward in one batch; the config round-trips as JSON; training follows the marks."""

import json

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import Answer, build_program, dataset
from training.engine.rewards.human_marks import MAX_MARKS
from training.engine.saving import deserialize, serialize
from training.engine.testing import FakeLanguageModel


def marks():
    return [
        # A person accepts "four" for "4", and refuses an exact "Paris" (say the row was wrong).
        {"expected": {"answer": "4"}, "predicted": {"answer": "four"}, "reward": 1.0},
        {"expected": {"answer": "Paris"}, "predicted": {"answer": "Paris"}, "reward": 0.0},
    ]


async def test_marked_predictions_score_as_marked_and_the_rest_fall_back():
    reward = synalinks.rewards.HumanMarks(
        marks=marks(), fallback=synalinks.rewards.ExactMatch(in_mask=["answer"])
    )
    truths = [Answer(answer="4"), Answer(answer="Paris"), Answer(answer="Rome"), Answer(answer="6")]
    preds = [Answer(answer="four"), Answer(answer="Paris"), Answer(answer="Rome"), None]
    assert await reward.score_batch(truths, preds) == [1.0, 0.0, 1.0, 0.0]
    assert (reward.hits, reward.fallbacks) == (2, 1)
    assert await reward(Answer(answer="4"), Answer(answer="4")) == 1.0  # unmarked: ExactMatch
    assert await reward(Answer(answer="5"), Answer(answer="four")) == 0.0  # other expected


async def test_masks_default_to_the_fallbacks_and_ignore_other_fields():
    reward = synalinks.rewards.HumanMarks(
        marks=[
            {
                "expected": {"answer": "4"},
                "predicted": {"answer": "four", "thinking": "x"},
                "reward": 1.0,
            }
        ],
        fallback=synalinks.rewards.ExactMatch(in_mask=["answer"]),
    )
    assert reward.in_mask == ["answer"]
    scores = await reward.score_batch(
        [{"answer": "4"}], [{"answer": "four", "thinking": "other reasoning"}]
    )
    assert scores == [1.0]


def test_config_is_plain_json_and_round_trips():
    reward = synalinks.rewards.HumanMarks(
        marks=marks(), fallback=synalinks.rewards.ExactMatch(in_mask=["answer"])
    )
    document = json.loads(json.dumps(serialize(reward)))
    assert document["config"]["fallback"]["class_name"].endswith("ExactMatch")
    again = deserialize(document)
    assert isinstance(again, synalinks.rewards.HumanMarks)
    assert again.marks == reward.marks and again.fallback.in_mask == ["answer"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"marks": [{"predicted": {"answer": "a"}, "reward": 2}]}, "outside"),
        ({"marks": [{"expected": "a", "predicted": {}, "reward": 1}]}, "object or null"),
        ({"marks": ["nope"]}, "expected"),
        ({"marks": [{"predicted": {"a": 1}, "reward": 1}] * (MAX_MARKS + 1)}, "at most"),
        ({"fallback": "ExactMatch"}, "must be a Reward"),
    ],
)
def test_bad_marks_are_refused_with_a_clear_message(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        synalinks.rewards.HumanMarks(**kwargs)


async def test_training_follows_the_marks():
    """An LM that answers 'four' with an example and '4' without: ExactMatch prefers no
    examples; a person who marked 'four' right and '4' wrong makes examples win instead."""

    def respond(request):
        return {"answer": "four" if request.examples else "4"}

    x, y = dataset()
    marked = [
        {"expected": {"answer": t.answer}, "predicted": {"answer": "four"}, "reward": 1.0}
        for t in y
    ] + [{"expected": {"answer": t.answer}, "predicted": {"answer": "4"}, "reward": 0.0} for t in y]
    program = await build_program(FakeLanguageModel(responder=respond))
    program.compile(
        reward=synalinks.rewards.HumanMarks(marks=marked),
        optimizer=synalinks.optimizers.RandomFewShot(nb_min_examples=1, seed=0),
    )
    history = await program.fit(x, y, validation_split=0.3, epochs=1, batch_size=4, seed=0)
    assert history.history["val_reward"][-1] == 1.0
    assert program.trainable_variables[0].value["examples"]
    assert program.reward.hits > 0


async def test_a_mark_with_inputs_matches_its_own_example_only():
    """On a label task one example's "right" must not make the same label pair right for
    every other input: targets carry their inputs (attach_inputs), marks name theirs."""
    reward = synalinks.rewards.HumanMarks(
        marks=[
            {
                "inputs": {"query": "Shipping to Canada?"},
                "expected": {"answer": "box"},
                "predicted": {"answer": "money"},
                "reward": 1.0,
            }
        ]
    )
    attach = synalinks.rewards.attach_inputs
    truths = [
        attach(Answer(answer="box"), {"query": "Shipping to Canada?"}),
        attach(Answer(answer="box"), {"query": "Where is my parcel?"}),
        Answer(answer="box"),  # no inputs attached: only marks without inputs could match
    ]
    preds = [Answer(answer="money")] * 3
    assert await reward.score_batch(truths, preds) == [1.0, 0.0, 0.0]
    assert truths[0].get_json() == {"answer": "box"}  # not a field: masks never see it
