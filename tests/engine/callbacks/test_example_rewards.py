"""Opt-in per-example rewards of ``evaluate`` (callbacks.ExampleRewards), for the bootstrap."""

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset

WRONG = {"Capital of France?", "Largest planet?", "Square root of 9?"}


def half_right_lm():
    responses = {q: {"answer": "no idea" if q in WRONG else a} for q, a in TRUTH.items()}
    return synalinks.testing.FakeLanguageModel(responses=responses)


async def test_example_rewards_are_per_example_in_input_order_across_batches():
    program = await build_program(half_right_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(), metrics=[synalinks.metrics.F1Score()])
    x, y = dataset()
    per_example = synalinks.callbacks.ExampleRewards()
    logs = await program.evaluate(x, y, batch_size=3, callbacks=[per_example])
    expected = [0.0 if q in WRONG else 1.0 for q in TRUTH]
    assert per_example.rewards == expected
    # what evaluate returns is unchanged: the mean reward and the metrics, nothing more
    assert set(logs) == {"reward", "f1_score"}
    assert logs["reward"] == sum(expected) / len(expected)


async def test_example_rewards_restart_with_each_evaluation():
    program = await build_program(half_right_lm())
    program.compile(reward=synalinks.rewards.ExactMatch())
    per_example = synalinks.callbacks.ExampleRewards()
    await program.evaluate(*dataset(), batch_size=4, callbacks=[per_example])
    await program.evaluate(*dataset(2), batch_size=4, callbacks=[per_example])
    assert per_example.rewards == [1.0, 0.0]


def lm_failing_on(question: str):
    """Right on every question but ``question``, whose call fails (a non-retryable error)."""

    def respond(request):
        if request.inputs["query"] == question:
            raise ValueError("simulated refusal (HTTP 400)")
        return {"answer": TRUTH[request.inputs["query"]]}

    return synalinks.testing.FakeLanguageModel(responder=respond)


async def test_predictions_and_errors_are_kept_per_example_when_asked():
    program = await build_program(lm_failing_on("Largest planet?"))
    program.compile(reward=synalinks.rewards.ExactMatch())
    x, y = dataset()
    per_example = synalinks.callbacks.ExampleRewards(predictions=True)
    logs = await program.evaluate(x, y, batch_size=4, callbacks=[per_example])
    failed = list(TRUTH).index("Largest planet?")
    assert len(per_example.predictions) == len(per_example.errors) == len(TRUTH)
    for index, (question, answer) in enumerate(TRUTH.items()):
        if index == failed:
            assert per_example.predictions[index] is None
            assert "simulated refusal" in per_example.errors[index]
            assert per_example.rewards[index] == 0.0
        else:
            assert per_example.predictions[index] == {"answer": answer}, question
            assert per_example.errors[index] is None
    assert set(logs) == {"reward"}


async def test_predictions_are_not_kept_by_default():
    program = await build_program(half_right_lm())
    program.compile(reward=synalinks.rewards.ExactMatch())
    per_example = synalinks.callbacks.ExampleRewards()
    await program.evaluate(*dataset(4), batch_size=4, callbacks=[per_example])
    assert per_example.rewards == [1.0, 0.0, 1.0, 1.0]  # "Capital of France?" is wrong
    assert per_example.predictions == [] and per_example.errors == []
