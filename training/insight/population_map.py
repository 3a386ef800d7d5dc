"""The population map of a run: its candidates placed by a PCA of their embeddings.

OMEGA's DNS embeds every candidate it compares; the engine sends each vector (bounded) with
the ``kept``/``dropped`` events of a competition, and ``PersistenceCallback`` stores it on the
candidate row (``event_fields``). Runs whose optimizer embeds nothing (RandomFewShot, OMEGA
with ``algorithm="ga"``, or candidates a stopped run never put to a competition) are embedded
here once, when their map is first opened (``embed_missing``), with the run's embedding model;
the vectors are stored on the rows, so it never happens twice.

``map_data`` is a pure function of the rows (tested without a database); ``run_map`` reads
them. The page's script (``static/training/population.js``) draws what ``map_data`` returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse

from training import optimizer_registry
from training.engine.optimizers.card import STEPS
from training.engine.optimizers.competition import embedding_text
from training.engine.optimizers.mutation import canonical
from training.engine.utils.projection import compact_embedding, pca_2d
from training.models import Candidate, Run
from training.programs import lm

logger = logging.getLogger(__name__)

#: Candidates a map shows at most (the latest ones beyond that).
MAX_POINTS = 400
#: Characters of a candidate's value shown when the pointer rests on its point.
PREVIEW_CHARS = 240
#: One embedding request of a map (all its missing candidates) may take this long.
EMBED_TIMEOUT_SECONDS = 120
FIELDS = (
    "pk",
    "variable",
    "candidate_id",
    "parent_ids",
    "operation",
    "value",
    "reward",
    "novelty",
    "status",
    "status_epoch",
    "epoch",
    "embedding",
)


class MapUnavailable(Exception):
    """The candidates could not be embedded (the message says why, for the page)."""


def embeds_itself(run: Run) -> bool:
    """Whether the run's optimizer embeds its candidates while it runs (OMEGA with DNS: its
    card's candidates compete by step, and it uses its embedding model)."""
    optimizer = run.config.get("optimizer") or {}
    params = optimizer.get("params") or {}
    name = optimizer.get("name")
    if not optimizer_registry.offered(name):
        return False
    cls = optimizer_registry.get(name)
    return cls.CARD.proposes == STEPS and cls.uses_embedding_model(params)


def embedding_model_name(run: Run) -> str:
    """The run's embedding model: OMEGA's own, else the dashboard's default."""
    params = (run.config.get("optimizer") or {}).get("params") or {}
    return (params.get("embedding_model") or "").strip() or settings.TRAINBOARD_EMBEDDING_MODEL


def rows_of(run: Run) -> list[dict[str, Any]]:
    """The map's rows of a run (the latest ``MAX_POINTS`` candidates), oldest first."""
    rows = list(run.candidates.order_by("-epoch", "-id").values(*FIELDS)[:MAX_POINTS])
    rows.reverse()
    return rows


def needs_embedding(run: Run, rows: list[dict[str, Any]]) -> bool:
    """Candidates without a vector that nobody else will embed: this page should ask for
    them (an active OMEGA run embeds its own at each competition)."""
    if not any(row["embedding"] is None for row in rows):
        return False
    return not (embeds_itself(run) and run.is_active)


def run_map(run: Run, ask: bool = True) -> dict[str, Any]:
    """What the population fragment renders: the map data, and whether to embed first.

    Args:
        ask: whether the fragment may ask the page to embed the missing candidates. The page
            and the live updates of an active run pass False: a run adds candidates faster
            than a web process embeds them (each update asking again queued one request per
            candidate event), and the first embedding of a web process loads the local
            embedding model on a thread of that process, which held its event loop ~1 s at a
            time: every live page it served saw the run's epochs seconds late
            (``bench/stream_latency.py``). A finished run's page asks once, and the run's last
            update (its end) asks.
    """
    rows = rows_of(run)
    data = map_data(rows)
    data["total"] = run.candidates.count()
    for point in data["points"]:
        point["url"] = reverse("training:candidate-detail", args=[run.pk, point["pk"]])
    return {
        "map": data,
        "map_json": json.dumps(data),
        "needs_embedding": ask and needs_embedding(run, rows),
        "embedding_model": embedding_model_name(run),
    }


def preview(value: Any) -> str:
    """A short text of a candidate's value (its instructions first, when it has some)."""
    if isinstance(value, dict) and isinstance(value.get("instructions"), str):
        text = value["instructions"]
        examples = value.get("examples")
        if isinstance(examples, list) and examples:
            text = f"{text} [+{len(examples)} example{'s' if len(examples) != 1 else ''}]"
    elif isinstance(value, dict):
        text = embedding_text(value)  # a NearestFewShot pool summarised, never its vectors
    else:
        text = canonical(value)
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def map_data(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Points of the population map from candidate rows (``FIELDS``), oldest first.

    Only rows whose embedding has the most common length are placed (a run embeds with one
    model; any other is left ``pending`` with the rows not embedded yet). Each point keeps
    what the page draws and filters by: ``x``/``y`` (PCA), ``epoch`` (born), ``dropped_at``
    (the competition that dropped it), ``reward`` (colour), ``novelty`` (size), ``status``
    and ``parents`` (pks of its parents on the map, same variable).

    Returns:
        ``{"points", "pending", "explained": [pc1, pc2], "dims", "epochs", "extent"}``.
    """
    lengths = Counter(len(r["embedding"]) for r in rows if r.get("embedding"))
    dims = lengths.most_common(1)[0][0] if lengths else 0
    placed = [r for r in rows if r.get("embedding") and len(r["embedding"]) == dims]
    projection = pca_2d([r["embedding"] for r in placed])
    by_key = {(r["variable"], r["candidate_id"]): r["pk"] for r in placed}
    points = []
    for row, (x, y) in zip(placed, projection.coords.tolist(), strict=True):
        dropped = row["status"] == "dropped"
        points.append(
            {
                "pk": row["pk"],
                "id": row["candidate_id"],
                "variable": row["variable"],
                "operation": row["operation"],
                "epoch": int(row["epoch"] or 0),
                "reward": row["reward"],
                "novelty": row["novelty"],
                "status": row["status"],
                "dropped_at": (
                    row["status_epoch"]
                    if dropped and row["status_epoch"] is not None
                    else (row["epoch"] if dropped else None)
                ),
                "parents": [
                    by_key[(row["variable"], parent)]
                    for parent in row["parent_ids"] or []
                    if (row["variable"], parent) in by_key
                ],
                "x": round(x, 6),
                "y": round(y, 6),
                "preview": preview(row["value"]),
            }
        )
    xs = [p["x"] for p in points] or [0.0]
    ys = [p["y"] for p in points] or [0.0]
    return {
        "points": points,
        "pending": len(rows) - len(placed),
        "explained": [round(v, 4) for v in projection.explained],
        "dims": dims,
        "epochs": max([int(r["epoch"] or 0) for r in rows] or [0]) + 1,
        "extent": [min(xs), max(xs), min(ys), max(ys)],
    }


def embed_missing(run: Run, limit: int = MAX_POINTS) -> int:
    """Embed the run's candidates that have no vector yet (at most ``limit``, the latest),
    store the vectors, and return how many were embedded.

    Raises:
        MapUnavailable: the embedding model could not be built or did not answer in time.
    """
    rows = [
        row
        for row in run.candidates.order_by("-epoch", "-id").values("pk", "value", "embedding")[
            :limit
        ]
        if row["embedding"] is None
    ]
    if not rows:
        return 0
    name = embedding_model_name(run)
    try:
        model = lm.make_embedding_model(name)
    except Exception as exc:
        raise MapUnavailable(f"The embedding model {name} cannot be used here: {exc}") from exc
    texts = [embedding_text(row["value"]) for row in rows]  # as OMEGA's DNS embeds them
    try:
        vectors = asyncio.run(asyncio.wait_for(model(texts), EMBED_TIMEOUT_SECONDS))
    except TimeoutError as exc:
        raise MapUnavailable(
            f"The embedding model {name} did not answer within {EMBED_TIMEOUT_SECONDS} s."
        ) from exc
    except Exception as exc:
        logger.warning("population map of run %s: embedding failed: %s", run.pk, exc)
        raise MapUnavailable(f"The candidates could not be embedded with {name}: {exc}") from exc
    if len(vectors) != len(rows):
        raise MapUnavailable(
            f"The embedding model {name} returned {len(vectors)} vectors for {len(rows)} texts."
        )
    with transaction.atomic():
        # A delete under way waits for these few updates, or they wait for it and find
        # nothing left (they took candidates newest first, a delete oldest first).
        if not Run.lock_before_its_rows(run.pk):
            return 0  # deleted meanwhile
        for row, vector in zip(rows, vectors, strict=True):
            Candidate.objects.filter(pk=row["pk"], embedding__isnull=True).update(
                embedding=compact_embedding(vector)
            )
    return len(rows)
