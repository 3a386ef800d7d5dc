"""Dataset pages. Thin: reads live in datasets.selectors; parsing, validation, the ingest
pipeline and storage in datasets.services.

Login is enforced for every view by core.middleware.LoginRequiredMiddleware; every lookup
is filtered by owner (in the selectors), so another user's dataset or upload is a 404.
"""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from datasets import labels, selectors, services
from datasets.builtins import BUILTINS
from datasets.forms import (
    FIELD_TYPE_CHOICES,
    DatasetSettingsForm,
    UploadForm,
    default_mapping_rows,
    mapping_entries,
    mapping_rows_from_post,
)
from datasets.ingest import DatasetError
from datasets.ingest.columns import MAX_COLUMNS
from datasets.ingest.fieldtypes import display
from datasets.ingest.splitting import check_test_ratio, split_note, suggested_test_ratio
from datasets.models import Dataset, DatasetRow, Upload
from datasets.upload_handler import SizeLimitUploadHandler
from datasets.views.versions import versions_context

ROWS_PER_PAGE = 20
MAPPED_PREVIEW_ROWS = 5


@require_GET
def dataset_list(request):
    imported = selectors.imported_builtin_keys(request.user)
    context = {
        "datasets": selectors.dataset_lines(request.user),
        "builtins": [(spec, spec.key in imported) for spec in BUILTINS.values()],
        "uploads": selectors.uploads_of(request.user),
    }
    return render(request, "datasets/list.html", context)


# --- upload -----------------------------------------------------------------------------


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _upload_error(request, form, message: str, status: int):
    if _wants_json(request):
        return JsonResponse({"error": message}, status=status)
    context = {"form": form or UploadForm(), "error": message, **_limit_context()}
    return render(request, "datasets/upload.html", context, status=status)


def _limit_context() -> dict:
    limit = services.upload_max_bytes()
    return {"max_bytes": limit, "max_mb": f"{limit / 1024 / 1024:.0f}", "max_columns": MAX_COLUMNS}


@csrf_exempt  # the limiter must be installed before CSRF reads request.POST; see _upload
@require_http_methods(["GET", "POST"])
def upload(request):
    if request.method == "POST":
        limiter = SizeLimitUploadHandler(request, services.upload_max_bytes())
        request.upload_handlers.insert(0, limiter)
        request.POST  # noqa: B018 - parse now, with the limiter first in the chain
        if limiter.refused:
            # Answered before CSRF: it changes nothing and the body was never (fully) read.
            limit = services.upload_max_bytes()
            return _upload_error(request, None, services.too_large_message(limit), 413)
    return _upload(request)


@csrf_protect
def _upload(request):
    if request.method == "GET":
        return render(request, "datasets/upload.html", {"form": UploadForm(), **_limit_context()})
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        message = " ".join(str(error) for errors in form.errors.values() for error in errors)
        return _upload_error(request, form, message or "Choose a file to upload.", 400)
    try:
        pending = services.save_upload(
            request.user,
            form.cleaned_data["file"],
            form.cleaned_data["format"],
            form.cleaned_data["encoding"],
        )
    except DatasetError as exc:
        return _upload_error(request, form, str(exc), 400)
    url = reverse("datasets:preview", args=[pending.pk])
    if _wants_json(request):
        return JsonResponse({"redirect": url})
    return redirect(url)


# --- preview and mapping -----------------------------------------------------------------


def _preview_context(pending: Upload, rows: list[dict], settings_form, error: str = "") -> dict:
    return {
        "upload": pending,
        "profile": pending.profile,
        "mapping_rows": rows,
        "field_types": FIELD_TYPE_CHOICES,
        "settings_form": settings_form,
        "error": error,
    }


@require_GET
def upload_preview(request, pk):
    pending = selectors.owned_upload(request.user, pk)
    stem = pending.original_name.rsplit(".", 1)[0]
    ratio = suggested_test_ratio(pending.profile["row_count"])  # a small file: enough to tell
    settings_form = DatasetSettingsForm(
        initial={"name": stem[:200], "test_ratio": ratio, "seed": 42}
    )
    rows = default_mapping_rows(pending.profile["columns"])
    return render(request, "datasets/preview.html", _preview_context(pending, rows, settings_form))


@require_POST
def mapping_preview(request, pk):
    """htmx partial: the first rows as the current mapping would store them, or the error."""
    pending = selectors.owned_upload(request.user, pk)
    rows = mapping_rows_from_post(pending.profile["columns"], request.POST)
    context = {"error": "", "inputs": [], "targets": [], "rows": [], "split": None}
    try:
        ratio = float(request.POST.get("test_ratio") or 0)
        check_test_ratio(ratio)
    except (ValueError, DatasetError):
        ratio = None  # the settings form says what is wrong with it
    if ratio is not None:
        context["split"] = {**split_note(pending.profile["row_count"], ratio), "ratio": ratio}
    try:
        mapping, sample = services.preview_mapping(
            pending,
            mapping_entries(rows),
            skip_incomplete=bool(request.POST.get("skip_incomplete")),
            limit=MAPPED_PREVIEW_ROWS,
        )
    except DatasetError as exc:
        context["error"] = str(exc)
    else:
        context["inputs"] = mapping.input_fields
        context["targets"] = mapping.target_fields
        context["rows"] = [
            (
                [display(row[f["name"]]) for f in mapping.input_fields],
                [display(row[f["name"]]) for f in mapping.target_fields],
            )
            for row in sample
        ]
    return render(request, "datasets/partials/mapping_preview.html", context)


@require_POST
def create_dataset(request, pk):
    pending = selectors.owned_upload(request.user, pk)
    rows = mapping_rows_from_post(pending.profile["columns"], request.POST)
    settings_form = DatasetSettingsForm(request.POST)
    error = ""
    if settings_form.is_valid():
        data = settings_form.cleaned_data
        try:
            dataset = services.create_dataset_from_upload(
                pending,
                name=data["name"],
                description=data["description"],
                mapping_entries=mapping_entries(rows),
                test_ratio=data["test_ratio"],
                seed=data["seed"],
                skip_incomplete=data["skip_incomplete"],
            )
        except DatasetError as exc:
            error = str(exc)
        else:
            messages.success(
                request, f"Dataset “{dataset.name}” created with {dataset.row_count} rows."
            )
            return redirect("datasets:detail", pk=dataset.pk)
    else:
        error = "Check the dataset settings below."
    context = _preview_context(pending, rows, settings_form, error)
    return render(request, "datasets/preview.html", context, status=400)


@require_POST
def discard_upload(request, pk):
    pending = selectors.owned_upload(request.user, pk)
    services.delete_upload(pending)
    messages.info(request, f"Discarded the upload “{pending.original_name}”.")
    return redirect("datasets:list")


@require_POST
def import_builtin(request, key):
    if key not in BUILTINS:
        raise Http404("No such built-in dataset.")
    dataset = services.import_builtin(request.user, key)
    messages.success(request, f"“{dataset.name}” is ready ({dataset.row_count} rows).")
    return redirect("datasets:detail", pk=dataset.pk)


# --- datasets ---------------------------------------------------------------------------


def _owned(request, pk) -> Dataset:
    return selectors.owned_dataset(request.user, pk)


def _rows_context(dataset: Dataset, split: str, page_number) -> dict:
    rows, split = selectors.rows_of(dataset, split)
    page = Paginator(rows, ROWS_PER_PAGE).get_page(page_number)
    names = dataset.input_names + dataset.target_names
    return {
        "dataset": dataset,
        "split": split,
        "page": page,
        "field_names": names,
        "input_count": len(dataset.input_names),
        "table": [
            (row.index, row.split, [display(row.data.get(name)) for name in names]) for row in page
        ],
    }


@require_GET
def dataset_detail(request, pk):
    dataset = _owned(request, pk)
    context = {
        **_rows_context(dataset, "all", 1),
        "columns": dataset.stats.get("columns", []),
        "schema": [
            (role, field, dataset.column_map.get(field["name"], ""))
            for role, fields in (("input", dataset.input_fields), ("target", dataset.target_fields))
            for field in fields
        ],
        "run_count": selectors.runs_using(dataset).count(),
        "label_profiles": labels.profiles(dataset),
        **versions_context(request.user, dataset),
    }
    return render(request, "datasets/detail.html", context)


@require_GET
def dataset_rows(request, pk):
    dataset = _owned(request, pk)
    context = _rows_context(dataset, request.GET.get("split", "all"), request.GET.get("page"))
    return render(request, "datasets/partials/rows.html", context)


@require_GET
def download_jsonl(request, pk):
    dataset = _owned(request, pk)
    split = request.GET.get("split") or None
    if split not in (None, DatasetRow.TRAIN, DatasetRow.TEST):
        raise Http404("Unknown split.")
    filename = f"{slugify(dataset.name) or 'dataset'}{'-' + split if split else ''}.jsonl"
    response = StreamingHttpResponse(
        services.iter_jsonl(dataset, split), content_type="application/x-ndjson; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
def download_original(request, pk):
    dataset = _owned(request, pk)
    return FileResponse(
        dataset.original_file.open("rb"),
        as_attachment=True,
        filename=dataset.original_name,
        content_type="application/octet-stream",
    )


@require_POST
def delete_dataset(request, pk):
    dataset = _owned(request, pk)
    try:
        services.delete_dataset(dataset)
    except services.DatasetInUse as exc:
        messages.error(request, str(exc))
        return redirect("datasets:detail", pk=pk)
    messages.success(request, f"Deleted “{dataset.name}”.")
    return redirect("datasets:list")
