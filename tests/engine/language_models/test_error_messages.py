"""LM error messages: missing credentials stop at once, secrets never appear, failures counted."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import Answer, build_program, dataset
from training.engine.language_models.errors import LanguageModelConfigError, call_error
from training.engine.language_models.redaction import redact
from training.engine.testing import FakeLanguageModel

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


class InternalServerError(Exception):
    """What litellm raises when OpenAI's client has no key: a 500, so once retried."""

    status_code = 500


MISSING = (
    "litellm.InternalServerError: OpenAIException - Missing credentials. Please pass an "
    "`api_key`, or set the `OPENAI_API_KEY` environment variable."
)


async def test_missing_credentials_are_a_config_error_not_retried():
    calls = []

    def respond(request):
        calls.append(1)
        raise InternalServerError(MISSING)

    lm = FakeLanguageModel(responder=respond, retries=3)
    with pytest.raises(LanguageModelConfigError, match="OPENAI_API_KEY"):
        await lm(MESSAGES, Answer)
    assert calls == [1]


def test_secrets_are_redacted_from_messages(monkeypatch):
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "plain-secret-value-42")
    text = (
        "denied for key plain-secret-value-42; header Authorization: Bearer abcdefghijklmnop; "
        "Incorrect API key provided: sk-proj-AbCdEf0123456789; api_key='zzzzzzzzzz'"
    )
    cleaned = redact(text)
    for secret in ("plain-secret-value-42", "abcdefghijklmnop", "sk-proj-AbCdEf", "zzzzzzzzzz"):
        assert secret not in cleaned
    assert cleaned.count("[redacted]") == 4
    error = call_error("model 'openai/x'", PermissionError(text), 1)
    assert "plain-secret-value-42" not in str(error) and "sk-proj" not in str(error)


async def test_the_program_counts_predictions_and_distinct_errors():
    lm = FakeLanguageModel(failure_rate=0.5, failure="fatal", seed=3, retries=0)
    program = await build_program(lm)
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]))
    x, y = dataset(10)
    await program.evaluate(x, y, batch_size=5)
    assert program.predictions == 10
    assert 0 < program.failed_predictions < 10
    assert list(program.prediction_errors.values()) == [program.failed_predictions]
    (message,) = program.prediction_errors
    assert "simulated non-retryable failure (HTTP 400)" in message
