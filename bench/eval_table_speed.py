"""How fast a page of the per-example evaluation table answers for a 1,000-example test split.

Creates a throwaway test database (``DATABASE_URL``'s server, or SQLite by default), seeds a
routing dataset with 1,000 test examples and a finished run whose before/after evaluations
stored a prediction for each (``persistence.store_evaluation``, the worker's own write:
about a third improved, some regressed, some failed), then times requests through Django's
test client, logged in as the owner: the table's htmx page (first page, a state filter, a
text search, a sort by change, a confusion-matrix cell, a later page) and the whole run page.
Each figure is the median of ``REPEATS`` requests after a warm-up.

Run: DATABASE_URL=postgres://… .venv/bin/python bench/eval_table_speed.py
Last line: ``eval table: page X ms for 1000 examples`` (X: the slowest of the table's
variants' medians; aim < 300 ms).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from tests.training.insight.helpers_eval_table import LABELS, routing_dataset, seeded_run  # noqa: E402

EXAMPLES = 1000
REPEATS = 15
VARIANTS = {
    "first page": "",
    "regressed only": "state=regressed",
    "text search": "q=message+99",
    "sorted by change": "sort=-change",
    "matrix cell": "matrix=after&field=team&expected=money&predicted=bug",
    "page 30": "page=30",
}


def predictions(truth: list[str], right: float, failed: float, rng: random.Random) -> list:
    out = []
    for label in truth:
        draw = rng.random()
        if draw < failed:
            out.append(None)
        elif draw < failed + right:
            out.append(label)
        else:
            out.append(rng.choice([other for other in LABELS if other != label]))
    return out


def timed(client: Client, url: str, **headers) -> float:
    for _ in range(2):  # warm-up
        assert client.get(url, **headers).status_code == 200
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        response = client.get(url, **headers)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return statistics.median(times) * 1000


def main() -> int:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        user = get_user_model().objects.create_user("bench", password="a-long-password-1")
        dataset = routing_dataset(user, test=EXAMPLES)
        truth = [LABELS[i % 3] for i in range(EXAMPLES)]
        rng = random.Random(0)
        run = seeded_run(
            user,
            dataset,
            predictions(truth, right=0.4, failed=0.02, rng=rng),
            predictions(truth, right=0.75, failed=0.02, rng=rng),
        )
        client = Client()
        client.force_login(user)
        table_url = reverse("training:eval-table", args=[run.pk])
        figures = {}
        for name, query in VARIANTS.items():
            figures[name] = timed(client, f"{table_url}?{query}", HTTP_HX_REQUEST="true")
            print(f"table, {name}: {figures[name]:.1f} ms")
        page = timed(client, run.get_absolute_url())
        print(f"whole run page (table, matrices and the rest): {page:.1f} ms")
        worst = max(figures.values())
        print(f"backend: {connection.vendor}, median of {REPEATS} requests each")
        print(f"eval table: page {worst:.0f} ms for {EXAMPLES} examples")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
