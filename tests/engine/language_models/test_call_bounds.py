"""Every LM call has an upper time bound, even when the provider ignores its own timeout."""

import time

import pytest

from tests.engine.helpers_engine import Answer
from training.engine.language_models import retry
from training.engine.language_models.errors import LanguageModelError
from training.engine.testing import FakeLanguageModel

MESSAGES = [{"role": "user", "content": '{"query": "q"}'}]


@pytest.fixture
def no_grace(monkeypatch):
    """The hard deadline without its grace period, so the tests take fractions of a second."""
    monkeypatch.setattr(retry, "DEADLINE_GRACE_SECONDS", 0.0)


@pytest.mark.parametrize("latency", [1e9, 1e308])
async def test_a_provider_that_never_answers_is_cut_at_the_deadline(no_grace, latency):
    lm = FakeLanguageModel(latency=latency, timeout=0.2, retries=1, backoff=0.0)
    started = time.perf_counter()
    with pytest.raises(LanguageModelError, match=r"no answer within 0\.2 s \(hard limit\)"):
        await lm(MESSAGES, Answer)
    assert time.perf_counter() - started < 2.0  # two attempts of 0.2 s, not 1e9 s


def test_the_deadline_never_exceeds_the_ceiling():
    grace = retry.DEADLINE_GRACE_SECONDS
    assert retry.attempt_deadline(30.0) == 30.0 + grace
    for unbounded in (None, 0, -1.0, float("nan"), float("inf"), 1e308):
        assert retry.attempt_deadline(unbounded) == retry.MAX_ATTEMPT_SECONDS + grace


async def test_a_provider_timeout_keeps_its_own_message(no_grace):
    async def provider_timeout():
        raise TimeoutError("litellm.Timeout: read timed out after 0.01 s")

    with pytest.raises(LanguageModelError, match="read timed out after 0.01 s"):
        await retry.call_with_retries(
            provider_timeout,
            where="model 'x/y'",
            semaphore_key=("x/y", None),
            max_concurrency=1,
            retries=0,
            backoff=0.0,
            on_success=lambda *_: None,
            on_failure=lambda *_: None,
            timeout=5.0,
        )
