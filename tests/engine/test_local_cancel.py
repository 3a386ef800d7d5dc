"""A cancelled call to the local model never starts a generation it was queued for.

The Llama instances generate in worker threads, which cancellation cannot stop; so a call
waits for a free instance before entering a thread, where the wait can be cancelled.
Otherwise an interrupted run keeps its worker busy until every queued call has generated.
"""

import asyncio
import threading

from training.engine.local import provider, smollm2


async def test_queued_local_calls_are_dropped_when_cancelled(monkeypatch):
    started = []
    lock = threading.Lock()
    first = threading.Event()  # the first call is generating
    release = threading.Event()  # lets it finish
    another = threading.Event()  # a second call started (it must not)

    def generate(model, messages, optional_params, cancelled=None):
        with lock:
            started.append(model)
            (another if len(started) > 1 else first).set()
        release.wait(timeout=30)
        return {}

    monkeypatch.setattr(provider, "_run_chat", generate)
    monkeypatch.setattr(provider, "_fill_model_response", lambda response, result: result)
    monkeypatch.setattr(smollm2, "instance_count", lambda: 1)
    handler = provider.LocalProvider()
    calls = [asyncio.ensure_future(handler.acompletion("smollm2", [], None, {})) for _ in range(4)]
    assert await asyncio.to_thread(first.wait, 30)  # one holds the instance, three wait for it
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    release.set()
    # a call queued for the thread, had one been, would start once the instance is free
    assert not await asyncio.to_thread(another.wait, 1.0)
    assert len(started) == 1
