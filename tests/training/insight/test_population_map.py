"""The run page's population map, lineage and spend-by-role: the pure layouts, and what a
real (fake-model) OMEGA or RandomFewShot run stores and shows."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from tests.training.conftest import make_program, make_run, run_config
from tests.training.runs.test_omega_runs import omega_run, run_task
from training.execution.recording import persistence
from training.insight import lineage, population_map, spend
from training.models import Candidate, Run


def row(pk, cid, parents=(), epoch=0, reward=0.5, status="kept", embedding=None, **extra):
    return {
        "pk": pk,
        "variable": extra.get("variable", "gen/state"),
        "candidate_id": cid,
        "parent_ids": list(parents),
        "operation": extra.get("operation", "mutation" if parents else "seed"),
        "value": extra.get("value", {"instructions": f"text {cid}"}),
        "reward": reward,
        "novelty": extra.get("novelty"),
        "status": status,
        "status_epoch": extra.get("status_epoch"),
        "epoch": epoch,
        "embedding": embedding,
    }


# -- pure: map -------------------------------------------------------------------------------
def test_map_data_places_embedded_rows_by_pca_and_links_parents():
    rows = [
        row(1, "c1", embedding=[0.0, 0.0, 0.0]),
        row(2, "c2", ["c1"], embedding=[4.0, 0.0, 0.0], novelty=0.8),
        row(3, "c3", ["c1"], epoch=1, status="dropped", status_epoch=1, embedding=[0, 1.0, 0]),
        row(4, "c4", ["c2", "c3"], epoch=1, embedding=None, operation="crossover"),
        row(5, "c5", epoch=1, embedding=[1.0, 2.0]),  # another length: not placed
    ]
    data = population_map.map_data(rows)
    assert [p["id"] for p in data["points"]] == ["c1", "c2", "c3"]
    assert data["pending"] == 2 and data["dims"] == 3 and data["epochs"] == 2
    assert sum(data["explained"]) == pytest.approx(1.0)
    points = {p["id"]: p for p in data["points"]}
    assert points["c2"]["parents"] == [1] and points["c1"]["parents"] == []
    assert points["c3"]["dropped_at"] == 1 and points["c2"]["dropped_at"] is None
    # the projection keeps the distances of these planar points
    c1, c2 = (
        np.array([points["c1"]["x"], points["c1"]["y"]]),
        np.array([points["c2"]["x"], points["c2"]["y"]]),
    )
    assert np.linalg.norm(c2 - c1) == pytest.approx(4.0, abs=1e-5)
    assert data["extent"][0] == min(p["x"] for p in data["points"])
    assert points["c2"]["preview"] == "text c2"


def test_map_previews_are_bounded_and_empty_maps_are_fine():
    long = row(1, "c1", value={"instructions": "x " * 500, "examples": [1, 2]}, embedding=[1.0])
    point = population_map.map_data([long])["points"][0]
    assert len(point["preview"]) == population_map.PREVIEW_CHARS
    empty = population_map.map_data([])
    assert empty["points"] == [] and empty["pending"] == 0 and empty["epochs"] == 1


def test_event_fields_take_only_a_bounded_numeric_embedding():
    assert persistence.event_fields({"competition_epoch": 2, "embedding": [0.5, 1]}) == {
        "status_epoch": 2,
        "embedding": [0.5, 1.0],
    }
    assert persistence.event_fields({"embedding": ["a", 1]}) == {}
    assert persistence.event_fields({"embedding": [0.1] * 2049 * 4}) == {}
    assert len(persistence.event_fields({"embedding": [0.1] * 1536})["embedding"]) == 512


# -- pure: lineage ---------------------------------------------------------------------------
def test_lineage_layout_generations_operations_and_best_path():
    candidates = [
        {"id": "c1", "parent_ids": [], "operation": "seed", "reward": 0.2, "epoch": 0},
        {"id": "c2", "parent_ids": ["c1"], "operation": "mutation", "reward": 0.5, "epoch": 0},
        {"id": "c3", "parent_ids": ["c1"], "operation": "mutation", "reward": 0.3, "epoch": 0},
        {"id": "c4", "parent_ids": ["c3", "c2"], "operation": "crossover", "reward": 0.9},
        {"id": "c5", "parent_ids": ["c3"], "operation": "few_shot", "reward": 0.1, "epoch": 1},
    ]
    candidates[3].update(epoch=1, status="best")
    data = lineage.layout(candidates)
    nodes = {n["id"]: n for n in data["nodes"]}
    assert [nodes[c]["depth"] for c in ("c1", "c2", "c3", "c4", "c5")] == [0, 1, 1, 2, 2]
    assert data["depth"] == 3 and data["widest"] == 2 and data["best"] == "c4"
    # best path: c4 back through its better parent (c2, 0.5 > c3's 0.3) to the seed
    assert data["best_path"] == ["c1", "c2", "c4"]
    best_edges = {(e["source"], e["target"]) for e in data["edges"] if e["best"]}
    assert best_edges == {("c1", "c2"), ("c2", "c4")}
    operations = {(e["source"], e["target"]): e["operation"] for e in data["edges"]}
    assert operations[("c3", "c4")] == operations[("c2", "c4")] == "crossover"
    assert operations[("c3", "c5")] == "few_shot"
    # children sit under their parents: c5 (child of c3 only) is on c3's side of c4
    assert (nodes["c5"]["x"] < nodes["c4"]["x"]) == (nodes["c3"]["x"] < nodes["c2"]["x"])
    assert all(0 < n["x"] < 1 for n in data["nodes"])


def test_lineage_merges_ids_shared_by_variables_and_survives_odd_input():
    candidates = [
        {"id": "c1", "parent_ids": [], "reward": 0.4, "variable": "a"},
        {"id": "c1", "parent_ids": [], "reward": 0.4, "variable": "b"},
        {"id": "c2", "parent_ids": ["c1", "missing", "c2"], "reward": 0.4, "operation": "few_shot"},
    ]
    data = lineage.layout(candidates)
    assert [n["id"] for n in data["nodes"]] == ["c1", "c2"]
    assert data["best"] == "c1"  # tie on reward: the earliest
    assert data["best_path"] == ["c1"]
    assert [(e["source"], e["target"]) for e in data["edges"]] == [("c1", "c2")]
    assert lineage.layout([])["nodes"] == [] and lineage.layout([])["best"] is None


# -- pure: spend -----------------------------------------------------------------------------
def test_spend_breakdown_by_role_and_caps_only_when_configured():
    usage = {
        "calls": 12,
        "cost": 0.5,
        "by_role": {
            "embedding": {"calls": 2, "prompt_tokens": 40, "latency": 0.5, "cost": 0.0},
            "prediction": {
                "calls": 8,
                "prompt_tokens": 800,
                "completion_tokens": 80,
                "latency": 6.0,
                "cost": 0.3,
                "memo_hits": 5,
            },
            "mutation": {
                "calls": 4,
                "prompt_tokens": 400,
                "completion_tokens": 100,
                "latency": 2.0,
                "cost": 0.2,
                "failures": 1,
            },
            "judge": {"calls": 0, "failures": 0},
        },
    }
    table = spend.breakdown(usage, {"epochs": 2}, elapsed_seconds=90)
    assert [r["role"] for r in table["rows"]] == ["prediction", "mutation", "embedding"]
    prediction = table["rows"][0]
    assert prediction["tokens"] == 880 and prediction["hits"] == 5
    assert prediction["calls_share"] == pytest.approx(100 * 8 / 14, abs=0.1)
    assert table["total"]["calls"] == 14 and table["total"]["seconds"] == pytest.approx(8.5)
    assert table["rows"][1]["failures"] == 1
    assert table["caps"] == []  # no cap configured: none shown
    capped = spend.breakdown(usage, {"budget_calls": 24, "budget_minutes": 3}, 90)
    assert [(c["key"], c["used"], c["percent"]) for c in capped["caps"]] == [
        ("budget_calls", 12, 50.0),
        ("budget_minutes", 1.5, 50.0),
    ]
    assert spend.breakdown({}, None, None)["rows"] == []


# -- runs ------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_omega_run_stores_embeddings_and_spend_and_the_page_shows_them(
    client_user, user, demo_dataset
):
    run = run_task(omega_run(user, demo_dataset))
    assert run.status == Run.SUCCEEDED, run.error
    competed = Candidate.objects.filter(run=run, status_epoch__isnull=False)
    assert competed.exists()
    assert all(0 < len(c.embedding) <= 512 for c in competed)
    dropped = Candidate.objects.filter(run=run, status="dropped")
    assert all(c.status_epoch is not None and c.status_epoch >= c.epoch for c in dropped)

    by_role = run.usage["by_role"]
    assert {"prediction", "mutation", "embedding"} <= set(by_role)
    assert sum(v["calls"] for v in by_role.values()) == (
        run.usage["calls"] + run.usage["embedding_calls"]
    )
    context = population_map.run_map(run)
    assert len(context["map"]["points"]) == competed.count()
    assert context["needs_embedding"] is False  # every candidate went through a competition

    html = client_user.get(run.get_absolute_url()).content.decode()
    assert 'id="population-svg"' in html and 'id="lineage-svg"' in html
    assert 'data-role="mutation"' in html and 'data-role="embedding"' in html
    assert 'id="spend-caps"' not in html  # no cap in this run's config
    assert "Best path:" in html
    assert 'hx-post="' not in html.split('id="run-population"')[1].split("</div>")[0]


@pytest.mark.django_db(transaction=True)
def test_random_few_shot_map_embeds_once_when_opened(client_user, user, demo_dataset, settings):
    settings.TRAINBOARD_EMBEDDING_MODEL = "fake/embedding"
    program = make_program(user, demo_dataset)
    run = run_task(make_run(user, program, demo_dataset, run_config(epochs=2)))
    assert run.status == Run.SUCCEEDED, run.error
    assert not Candidate.objects.filter(run=run, embedding__isnull=False).exists()
    url = reverse("training:run-population-embed", args=[run.pk])
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert f'hx-post="{url}"' in html  # the map asks for its embeddings once opened

    response = client_user.post(url)
    assert response.status_code == 200
    count = Candidate.objects.filter(run=run).count()
    assert Candidate.objects.filter(run=run, embedding__isnull=False).count() == count
    body = response.content.decode()
    assert f"{count} candidate" in body and "hx-post" not in body
    stored = list(Candidate.objects.filter(run=run).values_list("embedding", flat=True))
    client_user.post(url)  # cached: nothing embedded again
    assert list(Candidate.objects.filter(run=run).values_list("embedding", flat=True)) == stored
    html = client_user.get(run.get_absolute_url()).content.decode()
    assert f'hx-post="{url}"' not in html


@pytest.mark.django_db(transaction=True)  # the view embeds on a thread of its own
def test_embedding_a_map_is_for_the_runs_owner_and_says_why_it_failed(
    client, user, other_user, demo_dataset, settings
):
    run = make_run(user, make_program(user, demo_dataset), demo_dataset, status=Run.SUCCEEDED)
    Candidate.objects.create(
        run=run,
        variable="v",
        candidate_id="c1",
        value={"a": 1},
        operation="seed",
        status="best",
        reward=1.0,
    )
    url = reverse("training:run-population-embed", args=[run.pk])
    client.force_login(other_user)
    assert client.post(url).status_code == 404
    client.force_login(user)
    assert client.get(url).status_code == 405
    settings.TRAINBOARD_EMBEDDING_MODEL = "nowhere/missing"
    response = client.post(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="population-error"' in body and "nowhere/missing" in body
    assert "hx-post" not in body  # no retry loop
    assert Candidate.objects.get(run=run).embedding is None


@pytest.mark.django_db
def test_an_active_run_never_asks_the_page_to_embed(user, demo_dataset):
    """Each candidate event re-sent the map, and each copy asked the page for an embedding:
    the web process queued one per event and the Cancel button waited behind them."""
    from training.insight import live

    run = make_run(user, make_program(user, demo_dataset), demo_dataset, status=Run.RUNNING)
    Candidate.objects.create(
        run=run, variable="v", candidate_id="c1", value={"a": 1}, operation="seed", reward=0.5
    )
    url = reverse("training:run-population-embed", args=[run.pk])
    assert f'hx-post="{url}"' not in live.render_parts(run, ("population",), oob=True)
    # Nor the page itself: the web process's first embedding loads the local embedding model
    # on a thread of its own and held the event loop of every live page.
    assert live.page_context(run)["needs_embedding"] is False
    run.status = Run.SUCCEEDED  # the run's last update (its end) asks once more
    assert f'hx-post="{url}"' in live.render_parts(run, ("population",), oob=True)


def test_candidate_events_send_the_map_and_tree_at_most_every_few_seconds():
    from training.insight.sections import registry
    from training.insight.sections.throttle import Throttle

    def names(sections):
        return [section.name for section in sections]

    slow = {"population", "lineage", "candidate_confidence"}
    now = [0.0]
    throttle = Throttle(clock=lambda: now[0])
    assert names(throttle.due(1, {"candidate"})) == names(registry.changed_by({"candidate"}))
    assert slow <= set(names(registry.changed_by({"candidate"})))
    assert set(names(throttle.due(1, {"candidate"}))).isdisjoint(slow)
    assert names(throttle.due(1, {"batch_end"})) == names(registry.changed_by({"batch_end"}))
    # an epoch always heals the map and the tree (the Selection section waits its own time)
    assert {"population", "lineage"} <= set(names(throttle.due(1, {"epoch_end"})))
    assert set(names(throttle.due(1, {"candidate"}))).isdisjoint(slow)  # ...and restarts it
    now[0] += 60  # the wait is over: a candidate sends them all again
    assert names(throttle.due(1, {"candidate"})) == names(registry.changed_by({"candidate"}))


@pytest.mark.django_db(transaction=True)
def test_one_embedding_per_run_at_a_time_and_the_other_page_asks_again_later(
    client_user, user, demo_dataset, monkeypatch
):
    """Two pages open on one finished run: one request embeds, the other answers at once and
    asks again after a pause (not at once, which made a tight loop of requests)."""
    import threading

    from django.db import connection

    program = make_program(user, demo_dataset)
    run = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config=run_config(),
        status=Run.SUCCEEDED,
    )
    Candidate.objects.create(
        run=run, variable="v", candidate_id="c1", value={"a": 1}, operation="seed", reward=0.5
    )
    started, release, calls = threading.Event(), threading.Event(), []

    def slow_embed(target, limit=population_map.MAX_POINTS):
        calls.append(target.pk)
        started.set()
        release.wait(10)
        return 0

    monkeypatch.setattr(population_map, "embed_missing", slow_embed)
    url = reverse("training:run-population-embed", args=[run.pk])
    first = []

    def first_page():
        first.append(client_user.post(url))
        connection.close()  # this thread's own connection

    embedding = threading.Thread(target=first_page)
    embedding.start()
    assert started.wait(10)
    second = client_user.post(url).content.decode()
    release.set()
    embedding.join(10)
    assert calls == [run.pk]
    assert 'hx-trigger="load delay:2s"' in second
    assert first[0].status_code == 200
    assert 'hx-trigger="load"' in first[0].content.decode()  # still missing: asks on load
