"""What the run page's socket sends on connect, by how the page was drawn.

A page drawn after its run finished already holds the final per-example table, and the reader
may have filtered it (a confusion-matrix cell) before the socket opened: the snapshot must
not reset that table to its unfiltered first page. A page drawn while the run was active
needs the table from the snapshot, as does a finished run's page that did not say so.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from tests.training.test_views import make_finished_run
from training.models import Run
from training.routing import websocket_urlpatterns


async def _snapshot(user, path: str) -> str:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    try:
        return await communicator.receive_from(timeout=5)
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_page_drawn_finished_keeps_its_own_per_example_table(
    client, user, program, demo_dataset
):
    run = await sync_to_async(make_finished_run)(user, program, demo_dataset)
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(run.get_absolute_url())).content.decode()
    assert f'ws-connect="/ws/runs/{run.pk}/?drawn=finished"' in page

    kept = await _snapshot(user, f"/ws/runs/{run.pk}/?drawn=finished")
    assert 'id="run-status"' in kept and 'id="run-epochs"' in kept
    assert 'id="eval-table"' not in kept

    plain = await _snapshot(user, f"/ws/runs/{run.pk}/")
    assert 'id="eval-table"' in plain


@pytest.mark.django_db(transaction=True)
async def test_a_run_active_again_sends_its_table_whatever_the_page_said(
    user, program, demo_dataset
):
    run = await sync_to_async(make_finished_run)(user, program, demo_dataset, status=Run.RUNNING)
    snapshot = await _snapshot(user, f"/ws/runs/{run.pk}/?drawn=finished")
    assert 'id="eval-table"' in snapshot
