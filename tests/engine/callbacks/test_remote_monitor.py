"""RemoteMonitor streams a fit to a dashboard over HTTP, and the fit never fails or waits
because the dashboard is away: a real loopback listener stands in for the dashboard (it
refuses, answers 503, then takes the events, or asks to stop), and a closed port for one
that is down."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import build_program, dataset, oracle_lm
from tests.support.waiting import until


class Dashboard:
    """A listener that answers ``/api/runs/from-code`` and ``/api/runs/1/events`` and records
    each body; ``busy`` requests first get 503 (a dashboard restarting); ``stop`` asks the
    fit to stop in every answer to events."""

    def __init__(self, busy: int = 0, stop: bool = False) -> None:
        self.bodies: list[tuple[str, dict]] = []
        self.busy = busy
        self.stop = stop
        self.received = threading.Event()  # a train_end arrived
        self.empty_post = threading.Event()  # a post with no event and no trace: a keepalive
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if dashboard.busy:
                    dashboard.busy -= 1
                    self._answer(503, {"detail": "restarting"})
                    return
                dashboard.bodies.append((self.path, body))
                if self.path.endswith("/from-code"):
                    self._answer(201, {"id": 1, "url": "http://dash/runs/1/", "status": "running"})
                    return
                if any(e.get("type") == "train_end" for e in body.get("events", [])):
                    dashboard.received.set()
                if body.get("events") == [] and body.get("traces") == []:
                    dashboard.empty_post.set()
                self._answer(200, {"stop": dashboard.stop, "status": "running"})

            def _answer(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[dict]:
        return [e for path, body in self.bodies if path.endswith("/events") for e in body["events"]]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def compiled(**optimizer):
    program = await build_program(oracle_lm())
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(nb_candidates=2, **optimizer),
    )
    return program


async def test_the_run_page_gets_the_program_rows_events_evaluations_and_traces():
    dashboard = Dashboard()
    try:
        program = await compiled()
        x, y = dataset(8)
        monitor = synalinks.callbacks.RemoteMonitor(url=dashboard.url, token="tb_x")
        await program.evaluate(x[:4], y[:4], callbacks=[monitor])
        await program.fit(x, y, epochs=2, batch_size=4, seed=1, callbacks=[monitor])
        await program.evaluate(x[:4], y[:4], callbacks=[monitor])
        assert await monitor.flush(timeout=60)
    finally:
        dashboard.close()
    path, created = dashboard.bodies[0]
    assert path == "/api/runs/from-code"
    assert created["program"]["name"] == program.name
    assert len(created["rows"]) == 8
    assert created["rows"][0]["inputs"] == {"query": x[0].query}
    assert created["optimizer"]["name"] == "RandomFewShot"
    kinds = [event["type"] for event in dashboard.events()]
    # the evaluation made before fit waited for the run, then came first; the one after last
    assert kinds[0] == "evaluation" and kinds[-1] == "evaluation"
    assert [e["phase"] for e in dashboard.events() if e["type"] == "evaluation"] == [
        "before",
        "after",
    ]
    assert kinds.count("epoch_end") == 2 and "candidate" in kinds and "train_end" in kinds
    end = next(e for e in dashboard.events() if e["type"] == "train_end")
    trained = program.get_config()
    assert end["program"]["variables"] == trained["variables"]
    before = dashboard.events()[0]
    assert before["example_rewards"] == [1.0, 1.0, 1.0, 1.0]
    assert before["rows"][1]["targets"] == {"answer": y[1].answer}
    traces = [t for path, body in dashboard.bodies for t in body.get("traces", [])]
    calls = [trace for trace in traces if trace["kind"] == "completion"]
    assert calls and all(trace["messages"] for trace in calls)
    assert [trace["seq"] for trace in traces] == list(range(1, len(traces) + 1))
    usage = [body["usage"] for path, body in dashboard.bodies if path.endswith("/events")]
    assert usage[-1]["calls"] > 0


async def test_a_dashboard_that_is_down_costs_the_fit_nothing_but_a_warning(closed_port, caplog):
    program = await compiled()
    x, y = dataset(8)
    monitor = synalinks.callbacks.RemoteMonitor(
        url=f"http://127.0.0.1:{closed_port}", token="tb_x", capacity=5
    )
    with caplog.at_level(logging.WARNING, logger="training.engine.callbacks.remote_monitor"):
        history = await program.fit(x, y, epochs=3, batch_size=2, seed=1, callbacks=[monitor])
        # a fast fit may end before the sender's first attempt has been refused
        until(lambda: not monitor.outbox.reachable, 30, "the sender found the dashboard away")
    assert len(history.history["reward"]) == 3
    assert "is not answering" in caplog.text
    # the buffer holds at most its capacity; per-batch progress went first, then newer items
    assert len(monitor.outbox.items) <= 5
    assert monitor.dropped > 0
    assert await monitor.flush(timeout=30) is False  # nothing to wait for while it is away


async def test_events_sent_while_the_dashboard_restarts_arrive_in_order_once_it_answers():
    dashboard = Dashboard(busy=2)
    try:
        program = await compiled()
        x, y = dataset(6)
        monitor = synalinks.callbacks.RemoteMonitor(url=dashboard.url, token="tb_x")
        await program.fit(x, y, epochs=2, batch_size=3, seed=1, callbacks=[monitor])
        assert dashboard.received.wait(60), "the fit's events never reached the dashboard"
    finally:
        dashboard.close()
    kinds = [event["type"] for event in dashboard.events()]
    assert kinds[0] == "train_begin" and kinds[-1] == "train_end"
    assert [e["epoch"] for e in dashboard.events() if e["type"] == "epoch_end"] == [0, 1]


async def test_cancel_pressed_on_the_page_stops_the_fit_after_its_batch():
    dashboard = Dashboard(stop=True)
    try:
        program = await compiled()
        x, y = dataset(10)
        gate = threading.Event()

        class WaitForTheAnswer(synalinks.callbacks.Callback):
            """Each batch waits until the dashboard answered it (as a slow LM would)."""

            async def on_batch_end(self, batch, logs=None):
                await monitor.flush(timeout=30)
                gate.set()

        monitor = synalinks.callbacks.RemoteMonitor(url=dashboard.url, token="tb_x")
        history = await program.fit(
            x, y, epochs=5, batch_size=2, seed=1, callbacks=[monitor, WaitForTheAnswer()]
        )
        assert await monitor.flush(timeout=60)
    finally:
        dashboard.close()
    assert gate.is_set()
    assert program.stop_training
    # the answer to the first batch said stop: no epoch of the five ran to its end
    assert "reward" not in history.history
    assert [e["type"] for e in dashboard.events()].count("batch_end") == 1


async def test_a_long_quiet_batch_is_kept_alive_by_empty_posts(monkeypatch):
    """While a fit runs and has nothing to send (a long batch on a slow model), the outbox
    posts an empty batch now and then, so the dashboard does not take the run for dead."""
    from training.engine.callbacks import outbox

    monkeypatch.setattr(outbox, "KEEPALIVE", 0.2)
    dashboard = Dashboard()
    try:
        program = await compiled()
        x, y = dataset(4)

        class SlowBatch(synalinks.callbacks.Callback):
            async def on_batch_end(self, batch, logs=None):
                await monitor.flush(timeout=30)  # all sent: from here the outbox is idle
                await asyncio.to_thread(dashboard.empty_post.wait, 30)

        monitor = synalinks.callbacks.RemoteMonitor(url=dashboard.url, token="tb_x")
        await program.fit(x, y, epochs=1, batch_size=4, seed=1, callbacks=[monitor, SlowBatch()])
    finally:
        dashboard.close()
    assert dashboard.empty_post.is_set()


async def test_a_second_fit_with_the_same_monitor_is_a_run_of_its_own():
    dashboard = Dashboard()
    try:
        program = await compiled()
        x, y = dataset(4)
        monitor = synalinks.callbacks.RemoteMonitor(url=dashboard.url, token="tb_x")
        await program.fit(x, y, epochs=1, batch_size=4, seed=1, callbacks=[monitor])
        await program.fit(x, y, epochs=1, batch_size=4, seed=2, callbacks=[monitor])
        assert await monitor.flush(timeout=60)
        assert dashboard.received.wait(60)
    finally:
        dashboard.close()
    created = [path for path, _ in dashboard.bodies if path.endswith("/from-code")]
    assert len(created) == 2
    ends = [e for e in dashboard.events() if e["type"] == "train_end"]
    assert len(ends) == 2
