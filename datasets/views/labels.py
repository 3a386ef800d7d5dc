"""Label sets and the stratified split of a dataset (datasets/labels.py): two POST actions
on the dataset page, each owner-checked and answered with a redirect and a message."""

from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from datasets import labels, selectors
from datasets.ingest import DatasetError


@require_POST
def label_set(request, pk):
    dataset = selectors.owned_dataset(request.user, pk)
    name = request.POST.get("field", "")
    declare = request.POST.get("declare") == "1"
    try:
        choices = labels.set_label_set(dataset, name, declare)
    except DatasetError as exc:
        messages.error(request, str(exc))
    else:
        if choices:
            messages.success(request, f"“{name}” is a label set: {', '.join(choices)}.")
        else:
            messages.success(request, f"“{name}” is free text: programs may answer any string.")
    return redirect("datasets:detail", pk=dataset.pk)


@require_POST
def stratify(request, pk):
    dataset = selectors.owned_dataset(request.user, pk)
    name = request.POST.get("field", "")
    try:
        labels.stratify(dataset, name)
    except DatasetError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Re-split by “{name}”: {dataset.train_count} train / {dataset.test_count} test, "
            "each label in the same share on both sides.",
        )
    return redirect("datasets:detail", pk=dataset.pk)
