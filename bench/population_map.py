"""What the population map shows on a real OMEGA run (local models, through the dashboard).

    .venv/bin/python bench/population_map.py [--train 12] [--epochs 2] [--population-size 4]
        [--rfs] [--shots DIR]

Starts the dashboard and a worker the way the browser tests do, launches a tiny OMEGA run on
``local/smollm2`` (DNS embeddings from ``local/minilm``) and, with ``--rfs``, a RandomFewShot
run whose map is embedded when it is first opened; opens each run page in Chromium and waits
for the run to end. Prints, per run: candidates, how many the map placed, the variance the
two PCA axes explain, the range of the coordinates, and the spend by role. ``--shots`` saves
screenshots of the map, lineage and spend panels at 1280 and 390 px.
Last line: ``population map: N candidates on the map, PC1 X %, PC2 Y %, x [a, b], y [c, d]``
(the OMEGA run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "tests" / "browser"))

FIGURES = """
import json
from training.models import Run
from training.insight import population_map
from training.insight import spend
run = Run.objects.get(pk={run_id})
data = population_map.run_map(run)["map"]
table = spend.run_spend(run)["spend"]
print(json.dumps({{"status": run.status, "error": run.error, "total": data["total"],
    "placed": len(data["points"]), "pending": data["pending"], "dims": data["dims"],
    "explained": data["explained"], "extent": data["extent"], "epochs": data["epochs"],
    "dropped": sum(p["status"] == "dropped" for p in data["points"]),
    "operations": sorted({{p["operation"] for p in data["points"]}}),
    "spend": [(r["role"], r["calls"], r["tokens"], round(r["seconds"], 1)) for r in table["rows"]],
    "duration": run.duration.total_seconds() if run.duration else None}}))
"""


def figures(live, run_id: int) -> dict:
    from helpers_runs import shell

    return json.loads(shell(live, FIGURES.format(run_id=run_id)))


def describe(label: str, data: dict) -> str:
    x0, x1, y0, y1 = data["extent"]
    pc1, pc2 = (100 * v for v in data["explained"])
    print(
        f"{label}: {data['status']} in {data['duration'] or 0:.0f} s; {data['total']} candidates "
        f"({', '.join(data['operations'])}), {data['placed']} on the map, {data['pending']} not "
        f"embedded, {data['dropped']} dropped; {data['dims']}-number embeddings; PC1 {pc1:.1f} %, "
        f"PC2 {pc2:.1f} %; x [{x0:.3f}, {x1:.3f}], y [{y0:.3f}, {y1:.3f}]"
    )
    print(f"{label} spend by role (role, calls, tokens, call seconds): {data['spend']}")
    if data["error"]:
        print(f"{label} error: {data['error']}")
    return (
        f"{data['placed']} candidates on the map, PC1 {pc1:.1f} %, PC2 {pc2:.1f} %, "
        f"x [{x0:.3f}, {x1:.3f}], y [{y0:.3f}, {y1:.3f}]"
    )


def shoot(page, run_id: int, shots: Path | None, prefix: str) -> None:
    if shots is None:
        return
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"/runs/{run_id}/")
        page.wait_for_function(
            "() => document.querySelector('#population-svg').dataset.points !== undefined"
        )
        page.wait_for_timeout(500)  # let the lineage redraw at this width
        page.screenshot(path=str(shots / f"{prefix}_page_{width}.png"), full_page=True)
        for section in ("population", "lineage", "spend"):
            page.locator(f"#{section}-section").screenshot(
                path=str(shots / f"{prefix}_{section}_{width}.png")
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=12, help="training rows (a quarter validates)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=3)
    parser.add_argument("--population-size", type=int, default=4, help="OMEGA's population")
    parser.add_argument("--rfs", action="store_true", help="also a RandomFewShot run")
    parser.add_argument("--shots", type=Path, default=None, help="save screenshots here")
    args = parser.parse_args()

    from helpers_runs import create_program, launch_run, run_field, tiny_dataset_id
    from live_bench import logged_in_page, private_stack
    from playwright.sync_api import sync_playwright

    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)
    last = ""
    with private_stack("tb-bench-popmap-") as stack:
        live = stack.live
        dataset_id = tiny_dataset_id(live, train=args.train, test=2)
        program_id = create_program(live, "Local map", "local/smollm2", dataset_id, max_tokens=64)
        common = {
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "validation_split": 0.25,
            "evaluations_before": 0,
            "evaluations_after": 1,
            "seed": 3,
        }
        omega = {
            "optimizer": "OMEGA",
            "omega_embedding_model": "local/minilm",
            "omega_population_size": args.population_size,
        }
        runs = [("OMEGA", omega)]
        if args.rfs:
            runs.append(("RandomFewShot", {"optimizer": "RandomFewShot"}))
        with sync_playwright() as playwright:
            browser, page = logged_in_page(playwright, live)
            for label, config in runs:
                run_id = launch_run(live, program_id, dataset_id, **common, **config)
                print(f"{label}: run {run_id} launched", flush=True)
                page.goto(f"/runs/{run_id}/")
                page.locator(
                    "#run-status .status-badge:is([data-status=succeeded],[data-status=failed])"
                ).wait_for(timeout=1_500_000)
                if label == "RandomFewShot":  # the map embeds its candidates once opened
                    page.locator("#population-embedding").wait_for(
                        state="detached", timeout=300_000
                    )
                data = figures(live, run_id)
                summary = describe(label, data)
                if label == "OMEGA":
                    last = summary
                shoot(page, run_id, args.shots, label.lower())
                print(f"{label}: status {run_field(live, run_id, 'status')}", flush=True)
            browser.close()
        logs = sorted((stack.tmp / "var").glob("**/*.log"))
        tracebacks = [p.name for p in logs if "Traceback" in p.read_text(errors="replace")]
        print(f"logs read: {[p.name for p in logs]}; with a traceback: {tracebacks or 'none'}")
        if args.shots:  # kept beside the screenshots, to read
            for log in logs:
                shutil.copy(log, args.shots / f"log_{log.name}")
    print(f"population map: {last}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
