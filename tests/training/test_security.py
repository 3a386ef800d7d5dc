"""Owner-only access (pages, downloads, WebSocket) and escaping of LM/dataset text."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from training.insight import live
from training.models import Candidate, EpochLog, Run
from training.routing import websocket_urlpatterns

from .conftest import executed_run, make_program, make_run, run_config


def owned_objects(user, program, dataset):
    run = make_run(
        user,
        program,
        dataset,
        run_config(),
        status=Run.SUCCEEDED,
        trained_program_json=program.engine_json,
        checkpoint_epoch=0,
    )
    EpochLog.objects.create(run=run, epoch=0, logs={"reward": 0.5})
    candidate = Candidate.objects.create(
        run=run, variable="v", candidate_id="c1", operation="seed", value={}, status="scored"
    )
    return run, candidate


@pytest.mark.django_db
def test_other_users_get_404_on_every_page_and_download(
    client, user, other_user, program, demo_dataset
):
    run, candidate = owned_objects(user, program, demo_dataset)
    client.force_login(other_user)
    urls = [
        reverse("training:program-detail", args=[program.pk]),
        reverse("training:program-export", args=[program.pk]),
        reverse("training:run-detail", args=[run.pk]),
        reverse("training:run-poll", args=[run.pk]),
        reverse("training:candidate-detail", args=[run.pk, candidate.pk]),
        reverse("training:run-program-json", args=[run.pk]),
        reverse("training:run-history-csv", args=[run.pk]),
        reverse("training:run-plot", args=[run.pk, "history"]),
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url
    for name in ("training:run-cancel", "training:run-resume"):
        assert client.post(reverse(name, args=[run.pk])).status_code == 404, name
    # lists and compare never show someone else's runs
    assert str(run.pk) not in [
        str(r.pk) for r in client.get(reverse("training:run-list")).context["runs"]
    ]
    response = client.get(reverse("training:compare"), {"runs": [run.pk, run.pk]})
    assert response.context["runs"] == []
    html = client.get(reverse("training:program-list")).content.decode()
    assert program.name not in html


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client, user, program, demo_dataset):
    run, _ = owned_objects(user, program, demo_dataset)
    for url in (
        reverse("training:run-detail", args=[run.pk]),
        reverse("training:run-program-json", args=[run.pk]),
        reverse("training:program-list"),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


async def _connect(user, run_id):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run_id}/")
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


@pytest.mark.django_db(transaction=True)
async def test_websocket_is_owner_only_and_streams_group_messages(
    user, other_user, program, demo_dataset
):
    run, _ = await sync_to_async(owned_objects)(user, program, demo_dataset)
    communicator, connected, code = await _connect(other_user, run.pk)
    assert not connected and code == 4404
    communicator, connected, code = await _connect(AnonymousUser(), run.pk)
    assert not connected and code == 4401
    communicator, connected, _ = await _connect(user, run.pk)
    assert connected
    snapshot = await communicator.receive_from(timeout=5)
    assert (
        'id="run-status"' in snapshot
        and 'hx-swap-oob="true"' in snapshot
        and 'id="run-epochs"' in snapshot
    )
    await get_channel_layer().group_send(run.group_name, live.message("<div id='x'>hello</div>"))
    assert await communicator.receive_from(timeout=5) == "<div id='x'>hello</div>"
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
def test_lm_answers_and_dataset_text_are_escaped(client, user, demo_dataset):
    program = make_program(user, demo_dataset, model="fake/xss")
    run = executed_run(user, program, demo_dataset, evaluations_before=2, evaluations_after=2)
    client.force_login(user)
    candidate = Candidate.objects.filter(run=run).exclude(value__examples=[]).first()
    pages = [run.get_absolute_url()]
    if candidate is not None:
        pages.append(candidate.get_absolute_url())
    run.refresh_from_db()
    assert run.samples and run.samples[0]["predicted"]["team"].startswith("<script>")
    for url in pages:
        html = client.get(url).content.decode()
        assert "<script>window.__xss" not in html, url
    html = client.get(run.get_absolute_url()).content.decode()
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html
    # the trained program holds LM-produced demonstrations only as JSON data
    assert "<script>" not in live.render_parts(run)
