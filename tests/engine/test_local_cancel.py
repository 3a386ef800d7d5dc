"""A cancelled call to the local model never starts a generation it was queued for.

The Llama instances generate in worker threads, which cancellation cannot stop; so a call
waits for a free instance before entering a thread, where the wait can be cancelled.
Otherwise an interrupted run keeps its worker busy until every queued call has generated.
"""

import asyncio
import threading
import time

from training.engine.local import provider, smollm2


async def test_queued_local_calls_are_dropped_when_cancelled(monkeypatch):
    started = []
    lock = threading.Lock()

    def generate(model, messages, optional_params, cancelled=None):
        with lock:
            started.append(model)
        time.sleep(0.5)
        return {}

    monkeypatch.setattr(provider, "_run_chat", generate)
    monkeypatch.setattr(provider, "_fill_model_response", lambda response, result: result)
    monkeypatch.setattr(smollm2, "instance_count", lambda: 1)
    handler = provider.LocalProvider()
    calls = [asyncio.ensure_future(handler.acompletion("smollm2", [], None, {})) for _ in range(4)]
    await asyncio.sleep(0.1)
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    await asyncio.sleep(0.6)  # a queued thread, had one been started, would have begun by now
    assert len(started) == 1
