"""The live stream's renderer: the training loop never waits on a render, a
fragment is rendered once per change whatever came meanwhile, and a state change's inline
send never goes before what the renderer still owes the run."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from training.execution import events
from training.execution.events import EVENT_PARTS, PartsThrottle
from training.insight import live
from training.insight.live_renderer import HEAVY_PARTS, LiveRenderer

RENDER_SECONDS = 0.3


class SlowPage:
    """A render that takes RENDER_SECONDS and a send that records what reached the group."""

    def __init__(self):
        self.sent: list[tuple[str, list[str], dict]] = []
        self.rendering = threading.Event()

    def render(self, run, parts, **extra):
        self.rendering.set()
        time.sleep(RENDER_SECONDS)
        return f"{run.pk}:{','.join(parts)}:{extra.get('emitted_at')}"

    async def send(self, group, html):
        run, parts, emitted = html.split(":")
        self.sent.append((group, parts.split(","), {"emitted_at": emitted, "run": run}))


def test_the_training_loop_returns_before_the_fragments_are_rendered(monkeypatch):
    page = SlowPage()
    monkeypatch.setattr(live, "RENDERER", LiveRenderer(page.render, page.send))
    monkeypatch.setattr(live, "renders_off_thread", lambda: True)  # a WAL file or PostgreSQL
    run = SimpleNamespace(pk=41, group_name="run-41")

    async def training_loop():
        waited = 0.0
        for epoch in range(5):
            started = time.monotonic()
            await events.stored(run.group_name, run, EVENT_PARTS["epoch_end"], emitted_at=epoch)
            waited += time.monotonic() - started
            if epoch == 0:  # the next four come while the first is being rendered
                await asyncio.to_thread(page.rendering.wait, 5)
        return waited

    waited = asyncio.run(training_loop())
    assert waited < RENDER_SECONDS / 3
    assert live.RENDERER.drain(run.pk, timeout=10)
    # The first change is rendered at once; the four that came while it rendered, once.
    assert len(page.sent) == 2
    assert [emitted["emitted_at"] for _, _, emitted in page.sent] == ["0", "4"]
    assert all(parts == list(EVENT_PARTS["epoch_end"]) for _, parts, _ in page.sent)


def test_the_candidate_pictures_never_hold_up_the_quick_fragments(monkeypatch):
    page = SlowPage()
    renderer = LiveRenderer(page.render, page.send)
    run = SimpleNamespace(pk=42)
    renderer.submit("run-42", run, ("lineage", "leaderboard"))
    assert page.rendering.wait(5)  # the heavy lane is busy for RENDER_SECONDS
    renderer.submit("run-42", run, ("epochs", "progress"))
    started = time.monotonic()
    while not any("epochs" in parts for _, parts, _ in page.sent):
        assert time.monotonic() - started < 5
        time.sleep(0.01)
    # the epochs were rendered on their own lane, not after the lineage
    assert time.monotonic() - started < RENDER_SECONDS * 1.9
    assert renderer.drain(run.pk, timeout=10)
    assert HEAVY_PARTS == ("leaderboard", "population", "lineage", "candidate_confidence")
    assert sorted(parts for _, parts, _ in page.sent) == [
        ["leaderboard", "lineage"],
        ["progress", "epochs"],
    ]


def test_the_candidate_pictures_are_rendered_at_most_every_few_seconds_until_drained():
    page = SlowPage()
    renderer = LiveRenderer(page.render, page.send)
    run = SimpleNamespace(pk=44)
    renderer.submit("run-44", run, ("lineage",))
    assert page.rendering.wait(5)
    for _ in range(3):
        renderer.submit("run-44", run, ("lineage",))
    time.sleep(RENDER_SECONDS * 2)
    assert len(page.sent) == 1  # the three later changes wait their turn, merged
    assert renderer.drain(run.pk, timeout=10)  # a drain sends them now
    assert len(page.sent) == 2


def test_an_inline_send_waits_for_what_the_renderer_owes_the_run(monkeypatch):
    page = SlowPage()
    monkeypatch.setattr(live, "RENDERER", LiveRenderer(page.render, page.send))
    monkeypatch.setattr(live, "render_parts", lambda run, parts, **extra: "status-now")

    class Layer:
        async def group_send(self, group, message):
            page.sent.append((group, [message["html"]], {}))

    monkeypatch.setattr(live, "get_channel_layer", Layer)
    run = SimpleNamespace(pk=43, group_name="run-43")
    live.RENDERER.submit(run.group_name, run, ("status", "progress"))
    assert page.rendering.wait(5)
    live.broadcast(run, ("status",))
    assert [parts for _, parts, _ in page.sent] == [["status", "progress"], ["status-now"]]


def test_an_epoch_end_sends_the_candidate_pictures_only_when_a_change_is_owed():
    throttle = PartsThrottle(seconds=60)
    assert "lineage" not in throttle.parts("epoch_end")  # nothing changed: nothing re-read
    assert "lineage" in throttle.parts("candidate")
    assert "lineage" not in throttle.parts("candidate")  # throttled: owed
    assert set(throttle.parts("epoch_end")) >= {"population", "lineage"}
    assert "lineage" not in throttle.parts("epoch_end")


def test_the_selection_section_waits_its_own_time_and_comes_with_the_final_selection():
    """The Selection section (bootstraps, read rather than followed) is not sent at every
    epoch end as the map and the tree are: at most once per rare_seconds, and always with the
    final selection."""
    throttle = PartsThrottle(seconds=0, rare_seconds=60)
    assert "candidate_confidence" in throttle.parts("candidate")
    assert "candidate_confidence" not in throttle.parts("candidate")  # owed
    assert "candidate_confidence" not in throttle.parts("epoch_end")  # an epoch end waits too
    assert throttle.parts("final_selection") == ("leaderboard", "candidate_confidence")
    assert "candidate_confidence" not in throttle.parts("epoch_end")  # nothing owed now
