"""What the dashboard's population map and spend panel get from the engine: a PCA projection
(numpy only), bounded embeddings on OMEGA's competition events, and usage split by role
whether or not call traces are recorded."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import dataset
from tests.engine.helpers_events import EventRecorder
from tests.engine.optimizers.test_omega import compiled, make_omega, mutation_lm
from training.engine import tracing, usage
from training.engine.utils.projection import MAX_EMBEDDING_DIMS, compact_embedding, pca_2d


def test_pca_recovers_a_plane_and_explains_all_its_variance():
    rng = np.random.default_rng(3)
    plane = rng.normal(size=(40, 2)) * [5.0, 1.0]  # a long and a short axis
    basis = np.linalg.qr(rng.normal(size=(16, 2)))[0].T  # embedded in 16 dimensions
    vectors = plane @ basis + 7.0
    projection = pca_2d(vectors)
    assert projection.coords.shape == (40, 2)
    assert sum(projection.explained) == pytest.approx(1.0)
    assert projection.explained[0] > projection.explained[1] > 0
    # distances between points are those of the plane (a rotation at most)
    original = np.linalg.norm(plane[:, None] - plane[None], axis=-1)
    projected = np.linalg.norm(projection.coords[:, None] - projection.coords[None], axis=-1)
    assert np.allclose(original, projected)
    # the components are centred and ordered by variance
    assert np.allclose(projection.coords.mean(axis=0), 0.0)
    assert projection.coords[:, 0].var() > projection.coords[:, 1].var()


def test_pca_is_deterministic_in_sign_and_handles_degenerate_inputs():
    points = [[0.0, 0.0, 1.0], [3.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    first = pca_2d(points).coords
    again = pca_2d(np.array(points)[::-1]).coords[::-1]
    assert np.allclose(first, again)  # same points, other order: same picture, no flip
    assert pca_2d([]).coords.shape == (0, 2)
    single = pca_2d([[1.0, 2.0]])
    assert single.coords.tolist() == [[0.0, 0.0]] and single.explained == (0.0, 0.0)
    line = pca_2d([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    assert line.explained[0] == pytest.approx(1.0) and line.explained[1] == pytest.approx(0.0)
    assert np.allclose(line.coords[:, 1], 0.0)
    with pytest.raises(ValueError, match="NaN"):
        pca_2d([[0.0, float("nan")], [1.0, 1.0]])


def test_compact_embedding_is_bounded_and_keeps_distances_roughly():
    rng = np.random.default_rng(0)
    small = rng.normal(size=12)
    assert compact_embedding(small) == [round(float(v), 5) for v in small]
    big = rng.normal(size=(6, 1536))
    reduced = np.array([compact_embedding(v) for v in big])
    assert reduced.shape == (6, MAX_EMBEDDING_DIMS)
    assert compact_embedding(big[0]) == compact_embedding(big[0])  # same matrix every time
    before = np.linalg.norm(big[:, None] - big[None], axis=-1)
    after = np.linalg.norm(reduced[:, None] - reduced[None], axis=-1)
    mask = ~np.eye(6, dtype=bool)
    ratio = after[mask] / before[mask]
    assert ratio.min() > 0.75 and ratio.max() < 1.25  # Johnson-Lindenstrauss at 512 dims


def test_usage_by_role_comes_from_the_trace_context_without_a_recorder():
    assert not tracing.active()
    with usage.track() as totals:
        usage.record(usage.UsageRecord(model="m", prompt_tokens=10, completion_tokens=2, cost=0.5))
        with tracing.trace_context(role="mutation"):
            usage.record(usage.UsageRecord(model="m", prompt_tokens=30, latency=1.5, cost=0.25))
            usage.record(usage.UsageRecord(model="m", kind="parse", failed=True))
            usage.record(usage.UsageRecord(model="e", kind="embedding", prompt_tokens=4))
        with tracing.trace_context(role="judge"):
            usage.record(usage.UsageRecord(model="m", cache_hit=True))
    by_role = totals.to_dict()["by_role"]
    assert by_role["prediction"]["calls"] == 1
    assert by_role["prediction"]["completion_tokens"] == 2
    assert by_role["mutation"] == {
        "calls": 1,
        "prompt_tokens": 30,
        "completion_tokens": 0,
        "cost": 0.25,
        "latency": 1.5,
        "failures": 1,
        "cache_hits": 0,
        "memo_hits": 0,
    }
    assert by_role["embedding"]["calls"] == 1 and by_role["embedding"]["prompt_tokens"] == 4
    assert by_role["judge"]["cache_hits"] == 1 and by_role["judge"]["calls"] == 0


async def test_an_omega_fit_splits_its_usage_by_role_and_sends_embeddings():
    optimizer = make_omega(mutation_lm(), population_size=2)
    program = await compiled(optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    with synalinks.usage.track() as totals:  # no tracing.record(): roles still split
        await program.fit(
            x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0, callbacks=[recorder]
        )
    data = totals.to_dict()
    by_role = data["by_role"]
    assert by_role["prediction"]["calls"] > 0
    assert by_role["mutation"]["calls"] > 0
    assert by_role["embedding"]["calls"] > 0
    assert sum(v["calls"] for v in by_role.values()) == data["calls"] + data["embedding_calls"]
    assert sum(v["prompt_tokens"] for v in by_role.values()) == data["prompt_tokens"]
    competed = [e for e in recorder.of("candidate") if e["status"] in ("kept", "dropped")]
    assert competed
    # each competition's candidates carry its epoch: as many as it weighed, as many kept as
    # it kept (the optimizer's own record of its competitions)
    weighed, kept = Counter(), Counter()
    for competition in optimizer.competition_stats:
        weighed[competition["epoch"]] += competition["population"]
        kept[competition["epoch"]] += competition["kept"]
    assert sorted(weighed) == [0, 1]  # one competition an epoch
    assert Counter(e["competition_epoch"] for e in competed) == weighed
    assert Counter(e["competition_epoch"] for e in competed if e["status"] == "kept") == kept
    for event in competed:
        assert 0 < len(event["embedding"]) <= MAX_EMBEDDING_DIMS
        assert all(isinstance(v, float) for v in event["embedding"])
    # the vectors never ride along in the saved program (only the events carry them)
    assert all("embedding" not in c for v in program.trainable_variables for c in v.candidates)
