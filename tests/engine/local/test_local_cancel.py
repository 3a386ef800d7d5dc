"""A cancelled call to the local model never starts a generation it was queued for.

The Llama instances generate in worker threads, which cancellation cannot stop; so a call
waits for a free instance before entering a thread, where the wait can be cancelled.
Otherwise an interrupted run keeps its worker busy until every queued call has generated.

The calls take their core slots from a private ``CoreSlots`` (one slot, in ``tmp_path``): the
machine-wide slots are shared with every process on the machine (a live stack's worker, a
benchmark decoding), so the first call could wait there for as long as they keep the cores.
"""

import asyncio
import threading

from trainboard_local import smollm2
from trainboard_local.core_slots import CoreSlots


async def test_queued_local_calls_are_dropped_when_cancelled(monkeypatch, tmp_path):
    from trainboard_local import provider  # imports litellm: only where a test runs

    started = []
    heard = []  # for each generation: whether its call's cancel had reached it
    lock = threading.Lock()
    first = threading.Event()  # the first call is generating
    release = threading.Event()  # lets it finish

    def generate(model, messages, optional_params, cancelled=None):
        with lock:
            started.append(model)
        first.set()
        release.wait(timeout=30)
        heard.append(cancelled.is_set())
        return {}

    slots = CoreSlots(1, directory=tmp_path)
    monkeypatch.setattr(smollm2, "core_slots", lambda: slots)
    monkeypatch.setattr(smollm2, "threads_per_instance", lambda: 1)
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
    # A call queued for a worker thread, had one been, would run there once the instance is
    # free: shutting the executor down waits for every job it was given, so nothing can start
    # after this line.
    await asyncio.get_running_loop().shutdown_default_executor()
    assert started == ["smollm2"]
    assert heard == [True]  # the running generation was told to stop
    assert slots.try_take() == 0  # and its core slot was given back
