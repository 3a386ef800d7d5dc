"""The history chart's line of the epoch under way (``Run.epoch_so_far``): one point per
stored batch end, its running training reward, so a long epoch shows progress before its
point is in.

``with_batch(stored, event)`` is the line after that batch: a point at or past the batch is of
an abandoned attempt and goes (a resumed fit draws that stretch again), another epoch's line
is replaced, and a long epoch is thinned to :data:`MAX_EPOCH_POINTS` (every other point, the
last kept).
"""

from __future__ import annotations

import numbers
from typing import Any

#: Points of an epoch's line kept at most.
MAX_EPOCH_POINTS = 200


def with_batch(stored: Any, event: dict[str, Any]) -> dict[str, Any]:
    """``{"epoch", "batches", "points": [[batches done, running reward], ...]}`` after the
    ``batch_end`` ``event`` (``stored``: the line before it, or None)."""
    epoch, done = int(event["epoch"]), int(event["batch"]) + 1
    reward = (event.get("logs") or {}).get("reward")
    stored = stored if isinstance(stored, dict) else {}
    points = list(stored.get("points") or []) if stored.get("epoch") == epoch else []
    points = [point for point in points if point[0] < done]
    if isinstance(reward, numbers.Real) and not isinstance(reward, bool):
        points.append([done, float(reward)])
    if len(points) > MAX_EPOCH_POINTS:
        points = points[-1::-2][::-1]
    return {"epoch": epoch, "batches": int(event.get("batches") or 0), "points": points}
