"""The run page's per-example evaluation table: htmx pages of it, and its CSV download.

The run page renders the first page itself (``table_context``, from its own query string,
so a filtered page can be reloaded or shared); filtering, sorting, paging and a confusion
matrix's cell ask ``runs/<id>/examples/`` for the section again. Predictions came from an
LM: the templates print them autoescaped, never ``|safe``.
"""

from __future__ import annotations

import csv
import io
import re

from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from training.insight import eval_table as selectors
from training.runs.views.runs import owned_run

_FORMULA = re.compile(r"^[=+\-@\t\r]")


@require_GET
def eval_table(request, pk: int):
    run = owned_run(request, pk)
    if not request.htmx:  # a plain link: the run page shows the same table, filtered
        query = request.GET.urlencode()
        return HttpResponseRedirect(
            f"{run.get_absolute_url()}{'?' + query if query else ''}#eval-table"
        )
    context = {"run": run, **selectors.table_context(run, request.GET)}
    return render(request, "training/partials/eval_table.html", context)


def _cell(value) -> str:
    """A CSV cell a spreadsheet will not run as a formula (LM text may start with ``=``)."""
    text = "" if value is None else str(value)
    return f"'{text}" if _FORMULA.match(text) else text


@require_GET
def eval_table_csv(request, pk: int):
    run = owned_run(request, pk)
    filters = selectors.TableFilters.from_query(request.GET)
    buffer = io.StringIO()  # built whole: the rows are read here, not while streaming
    writer = csv.writer(buffer)
    for row in selectors.csv_rows(run, filters):
        writer.writerow([_cell(value) for value in row])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-examples.csv"'
    return response
