"""Which limits a (model, endpoint) gets (the administrator's table, the provider's published
figures, the default in flight), and a run that cannot get a slot within the wait fails
saying so, having sent nothing: executed in-process against a real local HTTP server, with
the slot held by another limiter on the session's real Redis."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from tests.openai_server import OpenAIServer
from tests.training.conftest import make_run, run_config
from training.engine.language_models.limits import rate_limits
from training.engine.language_models.limits.rate_limits import Limits, ProviderKey
from training.engine.language_models.litellm_loader import get_litellm
from training.execution import attempt as execution
from training.execution import provider_limits
from training.models import Program, Run
from training.programs import saved_endpoints
from training.programs.programs import build_engine_program
from training.shared_limits.redis_limiter import RedisProviderLimiter

MODEL = "openai/test-model"


def test_the_administrators_table_beats_published_figures_and_the_default(settings):
    settings.TRAINBOARD_PROVIDER_IN_FLIGHT = 5
    settings.TRAINBOARD_PROVIDER_LIMITS = json.dumps(
        {
            MODEL: {"rpm": 100},
            f"{MODEL}@http://10.0.0.7:8000/v1": {"in_flight": 2, "tpm": 5000},
        }
    )
    assert provider_limits.limits_for(ProviderKey(MODEL)) == Limits(in_flight=5, rpm=100)
    # the endpoint's own entry, however its URL ends, over the model's
    at_endpoint = provider_limits.limits_for(ProviderKey(MODEL, "http://10.0.0.7:8000/v1/"))
    assert at_endpoint == Limits(in_flight=2, rpm=100, tpm=5000)
    settings.TRAINBOARD_PROVIDER_IN_FLIGHT = 0  # no default: only what is configured
    assert provider_limits.limits_for(ProviderKey("openai/other")) == Limits()


def test_offline_and_test_models_have_no_provider_limits():
    assert provider_limits.limits_for(ProviderKey("local/smollm2")) == Limits()
    assert provider_limits.limits_for(ProviderKey("fake/fewshot")) == Limits()


def test_a_providers_published_requests_per_minute_apply_on_its_own_endpoint_only():
    table = get_litellm().model_cost
    model = next(name for name, info in table.items() if isinstance(info, dict) and info.get("rpm"))
    published = int(get_litellm().get_model_info(model)["rpm"])
    assert provider_limits.limits_for(ProviderKey(model)).rpm == published
    assert provider_limits.limits_for(ProviderKey(model, "http://10.0.0.7/v1")).rpm is None


@pytest.mark.parametrize(
    "table",
    ["{not json", '["a list"]', '{"openai/x": {"rps": 3}}', '{"openai/x": {"rpm": 0}}'],
)
def test_a_malformed_limits_table_is_an_error_naming_the_setting(settings, table):
    settings.TRAINBOARD_PROVIDER_LIMITS = table
    with pytest.raises(ImproperlyConfigured, match="TRAINBOARD_PROVIDER_LIMITS"):
        provider_limits.configured()


@pytest.fixture
def provider(settings, monkeypatch):
    """A real local OpenAI-compatible server the programs may use."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local-server-only")
    with OpenAIServer(limit=4, latency=0.0, content='{"team": "money"}') as server:
        yield server


@pytest.fixture
def slot_held_elsewhere(provider):
    """Installs a limiter of 1 request in flight to ``provider`` that waits at most 1 s, while
    a second one (another process's) holds that slot until the test ends."""
    url = os.environ["REDIS_URL"]
    prefix = f"trainboard:test:limits:{uuid.uuid4().hex}:"
    key = ProviderKey(MODEL, provider.api_base)

    def make(max_wait: float) -> RedisProviderLimiter:
        return RedisProviderLimiter(
            url,
            lambda key: Limits(in_flight=1),
            prefix=prefix,
            max_wait=max_wait,
            hint=provider_limits.HINT,
        )

    held, release = threading.Event(), threading.Event()

    async def hold() -> None:
        async with make(60).slot(key, tokens=1):
            held.set()
            await asyncio.to_thread(release.wait, 30)

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    previous = rate_limits.install(make(1.0))
    holder.start()
    assert held.wait(10)
    yield
    release.set()
    holder.join(10)
    rate_limits.install(previous)
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.mark.django_db(transaction=True)
def test_a_run_without_a_slot_within_the_wait_fails_saying_so(
    user, demo_dataset, provider, slot_held_elsewhere
):
    fields = {"name": "Limited", "module": "Generator", "instructions": "Route it."}
    saved_endpoints.save(user, "local server", provider.api_base)  # loopback: a saved endpoint
    engine = build_engine_program(
        input_fields=demo_dataset.input_schema_fields(),
        target_fields=demo_dataset.target_schema_fields(),
        model=MODEL,
        api_base=provider.api_base,
        endpoint="local server",
        **fields,
    )
    program = Program.objects.create(
        owner=user,
        dataset=demo_dataset,
        model=MODEL,
        api_base=provider.api_base,
        engine_json=engine.get_config(),
        **fields,
    )
    run = make_run(user, program, demo_dataset, run_config(epochs=1, evaluations_before=1))
    started = time.monotonic()
    assert execution.execute(run.pk, run.attempt) == Run.FAILED
    took = time.monotonic() - started
    run.refresh_from_db()
    assert run.error.startswith("Waited too long for the provider: model 'openai/test-model'")
    assert "1 in flight" in run.error and "within 1 s" in run.error
    assert "TRAINBOARD_PROVIDER_LIMITS" in run.error
    assert provider.arrivals == []  # nothing was sent past the limit
    assert took < 30
