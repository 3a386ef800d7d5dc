"""A run-page section is its template and its entry in ``insight.sections.registry``: with
nothing else, the page draws it where its entry says, a late socket's snapshot carries it,
and an event of a kind it names sends it again, while others do not."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from tests.training.conftest import make_program, make_run
from training.execution import events
from training.insight import live
from training.insight.sections import registry
from training.insight.sections.section import Section
from training.models import EpochLog, Run
from training.routing import websocket_urlpatterns

TOY = Section(
    "toy",
    lambda run, query: {"toy_epochs": run.epoch_logs.count()},
    changed_by=("epoch_end",),
    group="candidates",
    title="Toy",
    template="test_support/run_toy.html",
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(registry, "SECTIONS", (*registry.SECTIONS, TOY))


def running(user, dataset) -> Run:
    return make_run(user, make_program(user, dataset), dataset, status=Run.RUNNING)


@pytest.mark.django_db
def test_the_page_draws_a_new_section_in_its_card_where_its_entry_says(
    toy, client_user, user, demo_dataset
):
    run = running(user, demo_dataset)
    html = client_user.get(run.get_absolute_url()).content.decode()
    toy_at = html.index('<div id="run-toy">Toy: 0 epochs logged</div>')
    assert html.index('id="section-candidates"') < toy_at < html.index('id="section-spend"')
    assert html.rindex("<h2>Toy</h2>", 0, toy_at) > html.index('id="lineage-section"')


@pytest.mark.django_db(transaction=True)
async def test_the_live_stream_sends_a_new_section_after_the_kinds_it_names(
    toy, user, demo_dataset
):
    run = await sync_to_async(running)(user, demo_dataset)
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    try:
        snapshot = await communicator.receive_from(timeout=5)
        assert '<div id="run-toy" hx-swap-oob="true">Toy: 0 epochs logged</div>' in snapshot
        # a kind the toy does not name: the status and progress, not the toy
        await events.stored(run.group_name, run, events.PHASE)
        update = await communicator.receive_from(timeout=5)
        assert 'id="run-progress"' in update and "run-toy" not in update
        # an epoch end, which it names: sent again, drawn from the run as stored now
        await EpochLog.objects.acreate(run=run, epoch=0, logs={"reward": 0.5})
        await events.stored(run.group_name, run, "epoch_end")
        update = await communicator.receive_from(timeout=5)
        assert '<div id="run-toy" hx-swap-oob="true">Toy: 1 epoch logged</div>' in update
    finally:
        await sync_to_async(live.RENDERER.drain)(run.pk)
        await communicator.disconnect()


def test_every_kind_a_section_names_is_one_a_writer_says():
    """A section names kinds the worker emits: the type of an engine event the persistence
    callback stores, or one of ``events``' own."""
    from training.execution.recording.persistence import PersistenceCallback

    stored = {name.removeprefix("_on_") for name in dir(PersistenceCallback) if name[:4] == "_on_"}
    said = stored | {events.STATUS, events.PHASE, events.EVALUATION, events.HAND_CANDIDATE}
    for section in registry.SECTIONS:
        assert set(section.changed_by) | set(section.catch_up_on) <= said, section.name
        assert section.group in registry.GROUPS, section.name
