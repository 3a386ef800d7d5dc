"""A local call cancelled while litellm is handing it to the provider leaves nothing behind.

litellm runs the provider's sync half in an executor thread, which builds the provider's
``acompletion`` awaitable and returns it; a caller cancelled meanwhile (a run's call cap, a
cancelled run, a timeout) drops it unawaited. A coroutine made there would be reported as
"coroutine 'LocalProvider.acompletion' was never awaited" in the worker's log; the provider
returns a :class:`LazyCall`, which makes its coroutine only when it is awaited.
"""

import asyncio
import gc
import time
import warnings

import trainboard_local


async def test_local_calls_cancelled_in_litellms_handoff_leave_no_unawaited_coroutine(
    monkeypatch, litellm
):
    from trainboard_local import provider  # imports litellm: only where a test runs

    trainboard_local.register()  # litellm knows the provider, as after a first local request
    reached = []

    def generate(model, messages, optional_params, cancelled=None):
        reached.append(model)
        time.sleep(0.05)  # a generation's time: some calls are in it when cancelled
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {}}

    monkeypatch.setattr(provider, "_run_chat", generate)
    # one call to its end first: the provider answers through litellm, and litellm's own
    # first-call set-up is done, so the cancelled calls below meet the handoff at their delays
    await litellm.acompletion(model="local/smollm2", messages=[{"role": "user", "content": "hi"}])
    assert len(reached) == 1
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for delay in (0.0, 0.001, 0.002, 0.005, 0.01, 0.02):
            calls = [
                asyncio.ensure_future(
                    litellm.acompletion(
                        model="local/smollm2",
                        messages=[{"role": "user", "content": f"hi {i}"}],
                        max_tokens=2,
                    )
                )
                for i in range(12)
            ]
            await asyncio.sleep(delay)  # the delays are the test: cancel at each handoff step
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
        await asyncio.get_running_loop().shutdown_default_executor()
        gc.collect()
    unawaited = [str(w.message) for w in seen if "never awaited" in str(w.message)]
    assert unawaited == []


async def test_a_lazy_call_closed_before_it_started_never_runs():
    """``close()`` on a coroutine that never started ends it; so it does a LazyCall's: the
    function is never called, and awaiting it afterwards raises instead of running it."""
    import pytest

    from trainboard_local.lazy_call import LazyCall

    ran = []

    async def work(value):
        ran.append(value)
        return value

    started = LazyCall(work, 1)
    assert await started == 1
    closed = LazyCall(work, 2)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        await closed
    assert ran == [1]
