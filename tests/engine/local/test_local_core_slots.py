"""Machine-wide core slots (trainboard_local/core_slots.py): one busy llama.cpp thread
per core, whichever process holds it."""

import asyncio
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from trainboard_local.core_slots import CoreSlots


def test_slots_are_exclusive_and_come_back(tmp_path):
    first, second = CoreSlots(2, tmp_path), CoreSlots(2, tmp_path)  # two "processes"
    a = first.try_take()
    b = second.try_take()
    assert {a, b} == {0, 1}
    assert first.try_take() is None and second.try_take() is None
    first.give_back(a)
    assert second.try_take() == a


def test_a_slot_held_by_another_process_is_busy_until_it_exits(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from trainboard_local.core_slots import CoreSlots; "
            f"s = CoreSlots(1, {str(tmp_path)!r}); assert s.try_take() == 0; "
            "print('held', flush=True); time.sleep(60)",  # holds it until killed
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert CoreSlots(1, tmp_path).try_take() is None
    finally:
        holder.kill()
        holder.wait()
    assert CoreSlots(1, tmp_path).try_take() == 0  # the kernel dropped the dead holder's lock


async def test_waiting_for_all_slots_takes_none_partially(tmp_path):
    slots, other = CoreSlots(2, tmp_path), CoreSlots(2, tmp_path)
    held = other.try_take()
    found_busy = asyncio.Event()
    take_all = slots._take_all

    def noting_a_busy_look(count):
        taken = take_all(count)
        if taken is None:
            found_busy.set()
        return taken

    slots._take_all = noting_a_busy_look
    waiting = asyncio.ensure_future(slots.take_async(2))
    await asyncio.wait_for(found_busy.wait(), 5)  # it looked, and one slot was held
    assert not waiting.done()
    assert other.try_take() is not None  # the waiter holds no part of what it waits for
    other.give_back_all([0, 1])
    assert sorted(await asyncio.wait_for(waiting, 2)) == [0, 1]
    assert held is not None


async def test_a_call_cancelled_before_its_thread_started_gives_its_cores_back(
    tmp_path, monkeypatch
):
    # The chat call takes its core, then waits for a free executor thread; the executor's only
    # thread is busy. Cancelled there (Cancel, an attempt's deadline), the call must give the
    # core back itself: its queued job would never reach its own ``finally``.
    from trainboard_local import provider, smollm2

    slots = CoreSlots(1, tmp_path)
    took = asyncio.Event()
    take_async = slots.take_async

    async def noting_the_take(count):
        taken = await take_async(count)
        took.set()  # the call goes on to queue its job before the test runs again
        return taken

    slots.take_async = noting_the_take
    monkeypatch.setattr(smollm2, "core_slots", lambda: slots)
    monkeypatch.setattr(smollm2, "threads_per_instance", lambda: 1)
    monkeypatch.setattr(smollm2, "instance_count", lambda: 1)
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(executor)
    busy = threading.Event()
    blocker = loop.run_in_executor(executor, busy.wait)
    messages = [{"role": "user", "content": "Hi"}]
    call = asyncio.ensure_future(
        provider.LocalProvider().acompletion("local/smollm2", messages, None, {})
    )
    await asyncio.wait_for(took.wait(), 5)
    assert CoreSlots(1, tmp_path).try_take() is None  # the waiting call holds the core
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert CoreSlots(1, tmp_path).try_take() == 0  # given back by the cancelled call
    busy.set()
    await blocker
    executor.shutdown(wait=True)  # the queued job found the call cancelled and ran nothing


def test_borrowing_takes_free_slots_on_idle_cores_only_and_never_waits(tmp_path):
    def running(count):
        return lambda: count

    idle, other_process = CoreSlots(4, tmp_path, running=running(0)), CoreSlots(4, tmp_path)
    own = idle.try_take()
    theirs = other_process.try_take()
    borrowed = idle.borrow(own_threads=1)
    assert sorted(borrowed) == [2, 3]  # not theirs (1), never more than the free ones
    idle.give_back_all(borrowed)
    # another program's threads, holding no slot: 4 cores - ours - theirs in slot 1 - 2
    assert CoreSlots(4, tmp_path, running=running(3)).borrow(own_threads=1) == []
    one_busy = CoreSlots(4, tmp_path, running=running(2))  # 4 - ours - 2 running: 1 core
    taken = one_busy.borrow(own_threads=1)
    assert len(taken) == 1
    one_busy.give_back_all(taken)
    unknown = CoreSlots(4, tmp_path, running=lambda: None)  # no /proc: the slots decide
    taken = unknown.borrow(own_threads=1)
    assert sorted(taken) == [2, 3]
    unknown.give_back_all(taken)
    other_process.give_back(theirs)
    idle.give_back(own)


def test_the_running_threads_are_the_kernels_instantaneous_count(tmp_path, monkeypatch):
    from trainboard_local import core_slots

    loadavg = tmp_path / "loadavg"
    loadavg.write_text("4.71 3.83 3.26 6/164 31978\n")
    monkeypatch.setattr(core_slots, "LOADAVG", loadavg)
    assert core_slots.running_elsewhere() == 5  # the reading thread is not "elsewhere"
    monkeypatch.setattr(core_slots, "LOADAVG", tmp_path / "absent")
    assert core_slots.running_elsewhere() is None
