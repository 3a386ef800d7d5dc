"""CosineSimilarity, LMAsJudge and ProgramAsJudge on the scripted fakes (no network)."""

import json

import pytest

import training.engine as synalinks
from tests.engine.rewards.helpers_rewards import Answer, AnswerWithThinking
from training.engine.saving import deserialize, serialize
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

# -- CosineSimilarity ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cosine_similarity_orders_similar_above_unrelated():
    em = FakeEmbeddingModel()
    reward = synalinks.rewards.CosineSimilarity(embedding_model=em, in_mask=["answer"])
    truth = Answer(answer="the capital of France is Paris")
    same = await reward(truth, Answer(answer="the capital of France is Paris"))
    close = await reward(truth, Answer(answer="Paris is the capital"))
    far = await reward(truth, Answer(answer="bananas grow on trees"))
    assert same == 1.0
    assert 0.0 <= far < close < 1.0
    assert await reward(truth, None) == 0.0


@pytest.mark.asyncio
async def test_cosine_similarity_embeds_a_batch_in_one_call():
    em = FakeEmbeddingModel()
    reward = synalinks.rewards.CosineSimilarity(embedding_model=em, out_mask=["thinking"])
    y_true = [Answer(answer=f"answer number {i}") for i in range(5)]
    y_pred = [AnswerWithThinking(thinking="t", answer=f"reply {i}") for i in range(4)] + [None]
    scores = await reward.score_batch(y_true, y_pred)
    assert em.calls == 1
    assert len(scores) == 5 and scores[-1] == 0.0
    assert all(0.0 <= s <= 1.0 for s in scores)


@pytest.mark.asyncio
async def test_cosine_similarity_skips_embedding_identical_texts():
    em = FakeEmbeddingModel()
    reward = synalinks.rewards.CosineSimilarity(embedding_model=em)
    assert await reward(Answer(answer="4"), Answer(answer="4")) == 1.0
    assert em.calls == 0


def test_cosine_similarity_config_round_trip():
    reward = synalinks.rewards.CosineSimilarity(
        embedding_model=FakeEmbeddingModel(dimensions=32), in_mask=["answer"]
    )
    restored = deserialize(serialize(reward))
    assert isinstance(restored.embedding_model, FakeEmbeddingModel)
    assert restored.embedding_model.dimensions == 32
    assert restored.in_mask == ["answer"] and restored.name == "cosine_similarity"


def test_cosine_similarity_needs_an_embedding_model():
    with pytest.raises(ValueError, match="embedding_model"):
        synalinks.rewards.CosineSimilarity(in_mask=["answer"])


# -- LMAsJudge ----------------------------------------------------------------------------


def judge_lm(score, critique="ok"):
    """A fake judge that answers with ``score`` and records what it was shown."""
    lm = FakeLanguageModel(responder=lambda request: {"critique": critique, "score": score})
    lm.record_requests = True
    return lm


@pytest.mark.asyncio
async def test_lm_as_judge_returns_the_judges_score_and_shows_it_the_data():
    lm = judge_lm(0.75)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy", in_mask=["answer"])
    score = await reward(AnswerWithThinking(thinking="t", answer="4"), Answer(answer="four"))
    assert score == 0.75
    shown = lm.requests[0].inputs
    assert shown["criteria"] == "accuracy"
    assert json.loads(shown["reference"]) == {"answer": "4"}
    assert json.loads(shown["prediction"]) == {"answer": "four"}
    assert reward.judgements == 1 and reward.failed_judgements == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(("raw", "expected"), [(1.7, 1.0), (-0.4, 0.0), (0.0, 0.0), (1, 1.0)])
async def test_lm_as_judge_clamps_scores(raw, expected):
    reward = synalinks.rewards.LMAsJudge(language_model=judge_lm(raw), criteria="accuracy")
    assert await reward(Answer(answer="4"), Answer(answer="4")) == expected
    assert reward.failed_judgements == 0


@pytest.mark.asyncio
async def test_failed_judgement_scores_zero_and_is_counted():
    lm = FakeLanguageModel(responder=lambda request: "I refuse to grade this.")
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy")
    assert await reward(Answer(answer="4"), Answer(answer="4")) == 0.0
    assert await reward(Answer(answer="5"), Answer(answer="5")) == 0.0
    assert reward.judgements == 2 and reward.failed_judgements == 2


@pytest.mark.asyncio
async def test_lm_as_judge_none_prediction_scores_zero_without_a_call():
    lm = judge_lm(1.0)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy")
    assert await reward(Answer(answer="4"), None) == 0.0
    assert lm.calls == 0


@pytest.mark.asyncio
async def test_lm_as_judge_works_without_ground_truth():
    lm = judge_lm(0.5)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="politeness")
    assert await reward(None, Answer(answer="Thank you!")) == 0.5
    assert lm.requests[0].inputs.get("reference") is None


@pytest.mark.asyncio
async def test_lm_as_judge_scores_a_batch_concurrently():
    lm = judge_lm(0.5)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy")
    truths = [Answer(answer=str(i)) for i in range(6)]
    scores = await reward.score_batch(truths, truths[:5] + [None])
    assert scores == [0.5] * 5 + [0.0]
    assert lm.calls == 5 and reward.judgements == 5


@pytest.mark.asyncio
async def test_unreachable_judge_stops_instead_of_scoring_zero():
    from training.engine.language_models.errors import LanguageModelUnreachable

    lm = FakeLanguageModel(failure_rate=1.0, failure="unreachable", retries=0)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy")
    with pytest.raises(LanguageModelUnreachable):
        await reward(Answer(answer="4"), Answer(answer="4"))


@pytest.mark.asyncio
async def test_misconfigured_judge_model_stops_instead_of_scoring_zero():
    lm = synalinks.LanguageModel(model="nosuch-provider/judge", retries=0)
    reward = synalinks.rewards.LMAsJudge(language_model=lm, criteria="accuracy")
    with pytest.raises(synalinks.LanguageModelConfigError, match="nosuch-provider/judge"):
        await reward(Answer(answer="4"), Answer(answer="4"))
    assert reward.failed_judgements == 0


def test_lm_as_judge_config_round_trip():
    reward = synalinks.rewards.LMAsJudge(
        language_model=FakeLanguageModel(), criteria="accuracy and completeness"
    )
    data = serialize(reward)
    assert data["class_name"] == "synalinks>LMAsJudge"
    assert data["config"]["criteria"] == "accuracy and completeness"
    restored = deserialize(data)
    assert isinstance(restored.language_model, FakeLanguageModel)
    assert restored.criteria == "accuracy and completeness" and restored.name == "lm_as_judge"


def test_lm_as_judge_validates_arguments():
    with pytest.raises(ValueError, match="language_model"):
        synalinks.rewards.LMAsJudge(criteria="accuracy")
    with pytest.raises(ValueError, match="criteria"):
        synalinks.rewards.LMAsJudge(language_model=FakeLanguageModel(), criteria="  ")


# -- ProgramAsJudge -----------------------------------------------------------------------


class ScriptedJudgeProgram:
    """Stands in for a Program: async call on a JudgeInput, returns a DataModel or None."""

    def __init__(self, output):
        self.output = output
        self.seen = []

    async def __call__(self, inputs):
        self.seen.append(inputs)
        return self.output

    def get_config(self):
        return {"scripted": True}


class Verdict(synalinks.DataModel):
    reward: float


class Rating(synalinks.DataModel):
    score: float


class Unusable(synalinks.DataModel):
    grade: str


@pytest.mark.asyncio
async def test_program_as_judge_reads_reward_or_score():
    judge = ScriptedJudgeProgram(Verdict(reward=0.8))
    reward = synalinks.rewards.ProgramAsJudge(program=judge, in_mask=["answer"])
    assert await reward(Answer(answer="4"), AnswerWithThinking(thinking="t", answer="4")) == 0.8
    assert isinstance(judge.seen[0], synalinks.rewards.JudgeInput)
    assert json.loads(judge.seen[0].prediction) == {"answer": "4"}
    rating = synalinks.rewards.ProgramAsJudge(program=ScriptedJudgeProgram(Rating(score=3.0)))
    assert await rating(Answer(answer="4"), Answer(answer="4")) == 1.0


@pytest.mark.asyncio
async def test_program_as_judge_failure_scores_zero_and_is_counted():
    reward = synalinks.rewards.ProgramAsJudge(program=ScriptedJudgeProgram(None))
    assert await reward(Answer(answer="4"), Answer(answer="4")) == 0.0
    assert reward.failed_judgements == 1


@pytest.mark.asyncio
async def test_program_as_judge_without_score_field_is_a_clear_error():
    reward = synalinks.rewards.ProgramAsJudge(program=ScriptedJudgeProgram(Unusable(grade="A")))
    with pytest.raises(ValueError, match=r"'reward' or 'score'.*\['grade'\]"):
        await reward(Answer(answer="4"), Answer(answer="4"))


async def build_judge_program(lm):
    inputs = synalinks.Input(data_model=synalinks.rewards.JudgeInput)
    outputs = await synalinks.Generator(data_model=Verdict, language_model=lm)(inputs)
    return synalinks.Program(inputs=inputs, outputs=outputs, name="judge")


def reward_responder(request):
    """A fake judge program LM: reward 1.0 when the prediction equals the reference."""
    same = request.inputs.get("reference") == request.inputs.get("prediction")
    return {"reward": 1.0 if same else 0.25}


@pytest.mark.asyncio
async def test_program_as_judge_with_a_real_program():
    judge = await build_judge_program(FakeLanguageModel(responder=reward_responder))
    reward = synalinks.rewards.ProgramAsJudge(program=judge, in_mask=["answer"])
    assert await reward(Answer(answer="4"), AnswerWithThinking(thinking="t", answer="4")) == 1.0
    assert await reward(Answer(answer="4"), Answer(answer="5")) == 0.25
    assert await reward(Answer(answer="4"), None) == 0.0


@pytest.mark.asyncio
async def test_program_as_judge_config_round_trip():
    synalinks.saving.register_synalinks_serializable()(reward_responder)
    judge = await build_judge_program(FakeLanguageModel(responder=reward_responder))
    reward = synalinks.rewards.ProgramAsJudge(program=judge, in_mask=["answer"])
    restored = deserialize(serialize(reward))
    assert isinstance(restored.program, synalinks.Program)
    assert restored.in_mask == ["answer"] and restored.name == "program_as_judge"
    assert await restored(Answer(answer="4"), Answer(answer="4")) == 1.0


@pytest.mark.asyncio
async def test_program_as_judge_needs_a_single_input_program():
    lm = FakeLanguageModel(responder=reward_responder)
    a = synalinks.Input(data_model=Answer)
    b = synalinks.Input(data_model=Answer)
    out = await synalinks.Generator(data_model=Verdict, language_model=lm)([a, b])
    with pytest.raises(ValueError, match="one input"):
        synalinks.rewards.ProgramAsJudge(program=synalinks.Program(inputs=[a, b], outputs=out))
