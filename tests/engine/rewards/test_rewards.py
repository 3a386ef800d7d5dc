"""Rewards: ExactMatch, masking, the None rule, custom rewards and their configs."""

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.rewards.helpers_rewards import Answer, AnswerWithThinking, word_overlap_reward
from training.engine.masking import UnknownMaskFieldWarning, apply_mask, mask_pair
from training.engine.saving import UnknownObjectError, deserialize, serialize


@synalinks.saving.register_synalinks_serializable()
async def says_yes(y_true, y_pred):
    return "yes"


@synalinks.saving.register_synalinks_serializable()
async def too_big(y_true, y_pred):
    return 1.5


# -- masking ------------------------------------------------------------------------------


def test_apply_mask_keeps_in_mask_then_drops_out_mask():
    data = {"thinking": "t", "answer": "4", "extra": 1}
    assert apply_mask(data, in_mask=["answer"]) == {"answer": "4"}
    assert apply_mask(data, out_mask=["thinking"]) == {"answer": "4", "extra": 1}
    assert apply_mask(data, in_mask=["answer", "extra"], out_mask=["extra"]) == {"answer": "4"}
    assert apply_mask(data) == data
    assert apply_mask(None, in_mask=["answer"]) is None


def test_apply_mask_accepts_data_models():
    assert apply_mask(AnswerWithThinking(thinking="t", answer="4"), in_mask=["answer"]) == {
        "answer": "4"
    }


def test_unknown_mask_field_names_the_field_and_the_available_ones():
    with pytest.raises(ValueError) as info:
        apply_mask({"thinking": "t", "answer": "4"}, in_mask=["anwser"])
    message = str(info.value)
    assert "'anwser'" in message and "['answer', 'thinking']" in message


def test_out_mask_naming_an_absent_field_warns_and_excludes_nothing():
    with pytest.warns(UnknownMaskFieldWarning, match="out_mask.*'reasoning'"):
        assert apply_mask({"answer": "4"}, out_mask=["reasoning"]) == {"answer": "4"}


def test_mask_pair_accepts_a_field_present_on_one_side_only():
    # ground truth without `thinking`, ChainOfThought-style prediction with it
    y_true, y_pred = mask_pair(
        Answer(answer="4"), AnswerWithThinking(thinking="2+2", answer="4"), out_mask=["thinking"]
    )
    assert y_true == {"answer": "4"} and y_pred == {"answer": "4"}
    assert y_pred.get("answer") == "4" and y_pred.answer == "4"
    assert y_pred.get_json() == {"answer": "4"}


def test_mask_must_be_field_names():
    with pytest.raises(TypeError, match="field names"):
        synalinks.rewards.ExactMatch(in_mask=[1])


# -- ExactMatch ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_exact_match_scores_one_or_zero():
    reward = synalinks.rewards.ExactMatch(in_mask=["answer"])
    assert await reward(Answer(answer="Paris"), Answer(answer="Paris")) == 1.0
    assert await reward(Answer(answer="Paris"), Answer(answer="paris")) == 0.0


@pytest.mark.asyncio
async def test_exact_match_masks_fields():
    truth = AnswerWithThinking(thinking="2 plus 2", answer="4")
    pred = AnswerWithThinking(thinking="two and two make four", answer="4")
    assert await synalinks.rewards.ExactMatch()(truth, pred) == 0.0
    assert await synalinks.rewards.ExactMatch(in_mask=["answer"])(truth, pred) == 1.0
    assert await synalinks.rewards.ExactMatch(out_mask=["thinking"])(truth, pred) == 1.0
    # a ChainOfThought prediction against a plain ground truth
    assert (
        await synalinks.rewards.ExactMatch(out_mask=["thinking"])(Answer(answer="4"), pred) == 1.0
    )


@pytest.mark.asyncio
async def test_none_prediction_scores_zero():
    reward = synalinks.rewards.ExactMatch(in_mask=["answer"])
    assert await reward(Answer(answer="4"), None) == 0.0


@pytest.mark.asyncio
async def test_unknown_field_in_reward_names_reward_field_and_fields():
    reward = synalinks.rewards.ExactMatch(in_mask=["anwser"])
    with pytest.raises(ValueError) as info:
        await reward(Answer(answer="4"), Answer(answer="4"))
    assert "exact_match" in str(info.value)
    assert "'anwser'" in str(info.value) and "['answer']" in str(info.value)


@pytest.mark.asyncio
async def test_exact_match_needs_ground_truth():
    with pytest.raises(ValueError, match="ground truth"):
        await synalinks.rewards.ExactMatch()(None, Answer(answer="4"))


@pytest.mark.asyncio
async def test_batch_gives_mean_and_per_sample_scores():
    reward = synalinks.rewards.ExactMatch()
    y_true = np.array(
        [Answer(answer="4"), Answer(answer="Paris"), Answer(answer="x")], dtype=object
    )
    y_pred = np.array([Answer(answer="4"), None, Answer(answer="y")], dtype=object)
    assert await reward.score_batch(y_true, y_pred) == [1.0, 0.0, 0.0]
    assert await reward(y_true, y_pred) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="3 samples.*2"):
        await reward.score_batch(y_true, y_pred[:2])


def test_default_names_are_snake_case():
    assert synalinks.rewards.ExactMatch().name == "exact_match"
    assert synalinks.rewards.ExactMatch(name="em").name == "em"
    assert synalinks.rewards.MeanRewardWrapper(fn=word_overlap_reward).name == "word_overlap_reward"


def test_exact_match_config_round_trip():
    reward = synalinks.rewards.ExactMatch(in_mask=["answer"])
    data = serialize(reward)
    assert data == {
        "class_name": "synalinks>ExactMatch",
        "config": {"name": "exact_match", "in_mask": ["answer"], "out_mask": None},
    }
    restored = deserialize(data)
    assert isinstance(restored, synalinks.rewards.ExactMatch)
    assert restored.get_config() == reward.get_config()


# -- custom rewards -----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_mean_reward_wrapper_runs_the_guide_reward():
    reward = synalinks.rewards.MeanRewardWrapper(fn=word_overlap_reward)
    score = await reward(Answer(answer="William Shakespeare"), Answer(answer="shakespeare"))
    assert score == 0.5
    assert await reward(Answer(answer="x"), None) == 0.0


@pytest.mark.asyncio
async def test_mean_reward_wrapper_batch_is_the_mean():
    reward = synalinks.rewards.MeanRewardWrapper(fn=word_overlap_reward)
    y_true = [Answer(answer="a b"), Answer(answer="c d")]
    y_pred = [Answer(answer="a b"), Answer(answer="c")]
    assert await reward(y_true, y_pred) == pytest.approx(0.75)


@pytest.mark.asyncio
async def test_mean_reward_wrapper_passes_masked_views_when_masked():
    seen = []

    async def spy(y_true, y_pred):
        seen.append((dict(y_true), dict(y_pred)))
        return 1.0

    reward = synalinks.rewards.MeanRewardWrapper(fn=spy, out_mask=["thinking"])
    await reward(Answer(answer="4"), AnswerWithThinking(thinking="t", answer="4"))
    assert seen == [({"answer": "4"}, {"answer": "4"})]


@pytest.mark.asyncio
async def test_sync_custom_reward_is_accepted():
    reward = synalinks.rewards.MeanRewardWrapper(
        fn=lambda t, p: float(t.get("answer") == p.get("answer"))
    )
    assert await reward(Answer(answer="4"), Answer(answer="4")) == 1.0


@pytest.mark.asyncio
async def test_custom_reward_returning_non_number_names_the_function():
    reward = synalinks.rewards.MeanRewardWrapper(fn=says_yes)
    with pytest.raises(TypeError) as info:
        await reward(Answer(answer="4"), Answer(answer="4"))
    assert "says_yes" in str(info.value) and "'yes'" in str(info.value)


@pytest.mark.asyncio
async def test_custom_reward_out_of_range_names_the_function():
    reward = synalinks.rewards.MeanRewardWrapper(fn=too_big)
    with pytest.raises(ValueError) as info:
        await reward(Answer(answer="4"), Answer(answer="4"))
    assert "too_big" in str(info.value) and "1.5" in str(info.value)


def test_mean_reward_wrapper_config_stores_the_registered_name_only():
    reward = synalinks.rewards.MeanRewardWrapper(fn=word_overlap_reward, in_mask=["answer"])
    config = reward.get_config()
    assert config["fn"] == "Custom>word_overlap_reward"
    restored = deserialize(serialize(reward))
    assert restored.fn is word_overlap_reward
    assert restored.in_mask == ["answer"] and restored.name == "word_overlap_reward"


def test_mean_reward_wrapper_restores_from_custom_objects():
    async def local_reward(y_true, y_pred):
        return 1.0

    config = {
        "name": "local_reward",
        "in_mask": None,
        "out_mask": None,
        "fn": "Custom>local_reward",
    }
    restored = synalinks.rewards.MeanRewardWrapper.from_config(
        config, custom_objects={"local_reward": local_reward}
    )
    assert restored.fn is local_reward


def test_unregistered_custom_reward_cannot_be_saved_and_says_how_to_fix():
    async def not_registered(y_true, y_pred):
        return 1.0

    reward = synalinks.rewards.MeanRewardWrapper(fn=not_registered)
    with pytest.raises(UnknownObjectError) as info:
        reward.get_config()
    assert "not_registered" in str(info.value)
    assert "register_synalinks_serializable" in str(info.value)


def test_unknown_function_name_is_refused_on_load():
    config = {"name": "x", "in_mask": None, "out_mask": None, "fn": "os.system"}
    with pytest.raises(UnknownObjectError, match="os.system"):
        synalinks.rewards.MeanRewardWrapper.from_config(config)


def test_mean_reward_wrapper_needs_a_callable():
    with pytest.raises(TypeError, match="async function"):
        synalinks.rewards.MeanRewardWrapper(fn="word_overlap_reward")


def test_rewards_get():
    assert isinstance(synalinks.rewards.get("ExactMatch"), synalinks.rewards.ExactMatch)
    assert isinstance(
        synalinks.rewards.get(word_overlap_reward), synalinks.rewards.MeanRewardWrapper
    )
