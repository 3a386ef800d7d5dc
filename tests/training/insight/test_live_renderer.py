"""The live stream's renderer: the training loop never waits on a render, a
fragment is rendered once per change whatever came meanwhile, and a state change's inline
send never goes before what the renderer still owes the run."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from training.execution import events
from training.insight import live
from training.insight.live_renderer import HEAVY_PARTS_SECONDS, LiveRenderer
from training.insight.sections import registry
from training.insight.sections.throttle import Throttle

#: How long a render takes: the slowness the renderer must keep away from the training loop.
RENDER_SECONDS = 0.3
HEAVY = {section.name for section in registry.SECTIONS if section.heavy}


def names(sections):
    return [section.name for section in sections]


class SlowPage:
    """A render that takes RENDER_SECONDS (or, for the heavy parts, until ``heavy_until`` is
    set) and a send that records what reached the group.

    Events: ``rendering`` (a render started), ``rendered_again`` (a second one started),
    ``sent_once`` (something was sent), ``epochs_sent`` (the epochs fragment was)."""

    def __init__(self, heavy_until: threading.Event | None = None):
        self.sent: list[tuple[str, list[str], dict]] = []
        self.renders = 0
        self.heavy_until = heavy_until
        self.rendering = threading.Event()
        self.rendered_again = threading.Event()
        self.sent_once = threading.Event()
        self.epochs_sent = threading.Event()

    def render(self, run, parts, **extra):
        self.renders += 1
        (self.rendered_again if self.renders > 1 else self.rendering).set()
        if self.heavy_until is not None and set(parts) & HEAVY:
            assert self.heavy_until.wait(10), "the test never let the heavy render finish"
        else:
            time.sleep(RENDER_SECONDS)
        return f"{run.pk}:{','.join(parts)}:{extra.get('emitted_at')}"

    async def send(self, group, html):
        run, parts, emitted = html.split(":")
        self.sent.append((group, parts.split(","), {"emitted_at": emitted, "run": run}))
        self.sent_once.set()
        if "epochs" in parts.split(","):
            self.epochs_sent.set()


def test_the_training_loop_returns_before_the_fragments_are_rendered(monkeypatch):
    page = SlowPage()
    monkeypatch.setattr(live, "RENDERER", LiveRenderer(page.render, page.send))
    monkeypatch.setattr(live, "renders_off_thread", lambda: True)  # a WAL file or PostgreSQL
    run = SimpleNamespace(pk=41, group_name="run-41")

    async def training_loop():
        waited = 0.0
        for epoch in range(5):
            started = time.monotonic()
            await events.stored(run.group_name, run, "epoch_end", emitted_at=epoch)
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
    epoch_end = names(registry.changed_by({"epoch_end"}))
    assert all(parts == epoch_end for _, parts, _ in page.sent)


def test_the_candidate_pictures_never_hold_up_the_quick_fragments(monkeypatch):
    heavy_done = threading.Event()
    page = SlowPage(heavy_until=heavy_done)
    renderer = LiveRenderer(page.render, page.send)
    run = SimpleNamespace(pk=42)
    renderer.submit("run-42", run, ("lineage", "leaderboard"))
    assert page.rendering.wait(5)  # the heavy lane is busy until heavy_done
    renderer.submit("run-42", run, ("epochs", "progress"))
    # the epochs are rendered and sent on their own lane while the lineage still renders
    assert page.epochs_sent.wait(10)
    assert [parts for _, parts, _ in page.sent] == [["progress", "epochs"]]
    heavy_done.set()
    assert renderer.drain(run.pk, timeout=10)
    assert HEAVY == {"leaderboard", "population", "lineage", "candidate_confidence"}
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
    assert page.sent_once.wait(10)  # the first change, rendered at once
    # The three later changes wait their turn (HEAVY_PARTS_SECONDS after that render), merged:
    # an unthrottled renderer would start on them at once; give it a render's time to.
    assert RENDER_SECONDS < HEAVY_PARTS_SECONDS / 2  # a window well inside the throttle
    assert not page.rendered_again.wait(RENDER_SECONDS)
    assert len(page.sent) == 1
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
    throttle = Throttle(clock=lambda: 0.0)  # the wait never passes

    def due(kind):
        return names(throttle.due(1, {kind}))

    assert "lineage" not in due("epoch_end")  # nothing changed: nothing re-read
    assert "lineage" in due("candidate")
    assert "lineage" not in due("candidate")  # throttled: owed
    assert set(due("epoch_end")) >= {"population", "lineage"}
    assert "lineage" not in due("epoch_end")


def test_the_selection_section_waits_its_own_time_and_comes_with_the_final_selection():
    """The Selection section (bootstraps, read rather than followed) is not sent at every
    epoch end as the map and the tree are: at most once per rare_seconds, and always with the
    final selection."""
    throttle = Throttle(clock=lambda: 0.0)  # the wait never passes

    def due(kind):
        return names(throttle.due(1, {kind}))

    assert "candidate_confidence" in due("candidate")
    assert "candidate_confidence" not in due("candidate")  # owed
    assert "candidate_confidence" not in due("epoch_end")  # an epoch end waits too
    assert due("final_selection") == ["leaderboard", "candidate_confidence"]
    assert "candidate_confidence" not in due("epoch_end")  # nothing owed now
