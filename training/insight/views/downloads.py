"""Downloads of a run: the trained program JSON, the history CSV, the engine's PNG plots."""

from __future__ import annotations

import csv
import io
import json

from django.http import FileResponse, Http404, HttpResponse
from django.views.decorators.http import require_GET

from training.execution import summaries
from training.insight import plots
from training.runs import selectors
from training.runs.views.runs import owned_run


@require_GET
def run_program_json(request, pk: int):
    run = owned_run(request, pk)
    document = run.trained_program_json or run.checkpoint_json
    if document is None:
        raise Http404("This run has no trained program yet.")
    response = HttpResponse(
        json.dumps(document, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-program.json"'
    return response


@require_GET
def run_history_csv(request, pk: int):
    run = owned_run(request, pk)
    data = summaries.history(selectors.epoch_logs(run))
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    keys = list(data["series"])
    writer.writerow(["epoch", *keys])
    for index, epoch in enumerate(data["epochs"]):
        # 1-based, like the run page's epoch table and the history plot.
        writer.writerow([epoch + 1, *[_cell(data["series"][key][index]) for key in keys]])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-history.csv"'
    return response


def _cell(value) -> str:
    return "" if value is None else repr(float(value))


@require_GET
def run_plot(request, pk: int, kind: str):
    run = owned_run(request, pk)
    try:
        path = plots.plot_for(run, kind)
    except plots.NoPlotData as exc:
        raise Http404(str(exc)) from None
    return FileResponse(
        open(path, "rb"), content_type="image/png", filename=f"run-{run.pk}-{kind}.png"
    )
