"""Trainer integration: rewards and metrics scored a batch at a time, judge failures in usage."""

from __future__ import annotations

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, Answer, Query, dataset, oracle_lm
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


async def _program(lm, name=None):
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm)(inputs)
    return synalinks.Program(inputs=inputs, outputs=outputs, name=name)


async def test_cosine_similarity_makes_one_embedding_call_per_batch():
    em = FakeEmbeddingModel()
    lm = FakeLanguageModel(responder=lambda r: {"answer": f"maybe {r.inputs['query']}"})
    program = await _program(lm)
    program.compile(reward=synalinks.rewards.CosineSimilarity(embedding_model=em))
    x, y = dataset(10)
    with synalinks.usage.track() as usage:
        logs = await program.evaluate(x, y, batch_size=4)
    assert em.calls == 3 and usage.embedding_calls == 3  # batches of 4, 4, 2
    assert 0.0 < logs["reward"] < 1.0


async def test_reward_score_batch_gets_the_whole_batch_during_fit():
    seen: list[int] = []

    class BatchCounting(synalinks.rewards.ExactMatch):
        async def score_batch(self, y_true, y_pred):
            seen.append(len(y_pred))
            return await super().score_batch(y_true, y_pred)

    program = await _program(oracle_lm())
    program.compile(reward=BatchCounting(), optimizer=synalinks.optimizers.RandomFewShot())
    x, y = dataset(10)
    history = await program.fit(x, y, epochs=1, batch_size=4, validation_split=0.2, seed=0)
    assert history.history["reward"] == [1.0]
    assert seen and all(size > 1 for size in seen)
    assert 4 in seen  # a training batch, in one call


async def test_plain_async_function_reward_still_works_per_sample():
    calls = []

    async def reward(y_true, y_pred):
        calls.append(1)
        return 1.0 if y_pred is not None and y_pred.answer == y_true.answer else 0.0

    program = await _program(oracle_lm())
    program.compile(reward=reward)
    x, y = dataset(5)
    assert (await program.evaluate(x, y, batch_size=5))["reward"] == 1.0
    assert len(calls) == 5


async def test_metrics_receive_the_batch_in_one_update_state_call():
    f1 = synalinks.metrics.F1Score(in_mask=["answer"])
    batches: list[int] = []
    original = f1.update_state

    async def spy(y_true, y_pred):
        batches.append(len(y_pred) if isinstance(y_pred, list) else -1)
        await original(y_true, y_pred)

    f1.update_state = spy

    class PerSample(synalinks.metrics.Metric):
        """Overrides update_state with a one-sample signature: must keep getting samples."""

        async def update_state(self, y_true, y_pred):
            assert not isinstance(y_pred, list)
            self.total += float(y_pred is not None)
            self.count += 1

    per_sample = PerSample(name="answered")
    program = await _program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(), metrics=[f1, per_sample])
    x, y = dataset(10)
    logs = await program.evaluate(x, y, batch_size=4)
    assert batches == [4, 4, 2]
    assert logs["f1_score"] == 1.0 and logs["answered"] == 1.0 and per_sample.count == 10


def _flaky_judge():
    """A judge that returns an unusable answer for questions about capitals."""

    def respond(request):
        if "Capital" in request.inputs.get("prediction", "") or "Capital" in str(request.inputs):
            return "I refuse to grade this."
        return {"critique": "fine", "score": 1.0}

    return FakeLanguageModel(model="fake/judge", responder=respond)


async def test_judge_failures_are_reported_in_usage_for_evaluate_and_fit():
    judge = synalinks.rewards.LMAsJudge(language_model=_flaky_judge(), criteria="correct")
    lm = FakeLanguageModel(responder=lambda r: {"answer": r.inputs["query"]})
    program = await _program(lm)
    program.compile(reward=judge)
    x, y = dataset(10)
    capitals = sum("Capital" in q for q in list(TRUTH)[:10])
    assert capitals == 2
    with synalinks.usage.track() as usage:
        logs = await program.evaluate(x, y, batch_size=4)
    assert usage.judge_failures == capitals == judge.failed_judgements
    assert logs["reward"] == (10 - capitals) / 10
    assert usage.to_dict()["judge_failures"] == capitals
    # failures are judge failures, on top of (not inside) the LM failure counters
    assert usage.parse_failures == 2 * capitals  # the judge's garbage, parse-retried once

    before = judge.failed_judgements
    history = await program.fit(x, y, epochs=1, batch_size=5, seed=1)
    assert history.usage["judge_failures"] == judge.failed_judgements - before > 0


async def test_no_judge_no_judge_failures():
    program = await _program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch())
    x, y = dataset(4)
    history = await program.fit(x, y, epochs=1, batch_size=2, seed=0)
    assert history.usage["judge_failures"] == 0
