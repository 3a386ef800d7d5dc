"""Reads of the datasets app: every query a dataset page makes, scoped to its owner.

Views never touch the ORM; they call these (reads) or ``datasets.services`` (writes and
the ingest pipeline). Each getter filters by owner, so another user's dataset or upload is a
404 exactly like one that does not exist.

Example:

    dataset = selectors.owned_dataset(request.user, pk)   # Http404 if not the user's
    rows, split = selectors.rows_of(dataset, "train")
"""

from __future__ import annotations

from django.apps import apps
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from datasets.models import Dataset, DatasetRow, Upload

SPLITS = (DatasetRow.TRAIN, DatasetRow.TEST)


def datasets_of(user) -> QuerySet[Dataset]:
    return Dataset.objects.filter(owner=user)


def dataset_lines(user) -> list[Dataset]:
    """One entry per dataset: the newest version of each line of versions (newest first),
    each with ``version_count`` (how many versions its line has)."""
    lines: dict[int, list[Dataset]] = {}
    for dataset in datasets_of(user):
        lines.setdefault(dataset.root_id or dataset.pk, []).append(dataset)
    latest = []
    for group in lines.values():
        newest = max(group, key=lambda d: (d.version, d.pk))
        newest.version_count = len(group)
        latest.append(newest)
    return sorted(latest, key=lambda d: (d.created, d.pk), reverse=True)


def dataset_choices(user) -> QuerySet[Dataset]:
    """Only what a filter drop-down needs: id and name."""
    return Dataset.objects.filter(owner=user).only("id", "name", "version")


def imported_builtin_keys(user) -> set[str]:
    """Keys of the built-in datasets this user has already imported."""
    return set(datasets_of(user).exclude(builtin_key="").values_list("builtin_key", flat=True))


def uploads_of(user) -> QuerySet[Upload]:
    """Uploads still waiting for their mapping."""
    return Upload.objects.filter(owner=user)


def owned_dataset(user, pk) -> Dataset:
    """The user's dataset ``pk``; Http404 otherwise."""
    return get_object_or_404(Dataset, pk=pk, owner=user)


def owned_upload(user, pk) -> Upload:
    """The user's pending upload ``pk``; Http404 otherwise."""
    return get_object_or_404(Upload, pk=pk, owner=user)


def rows_of(dataset: Dataset, split: str) -> tuple[QuerySet[DatasetRow], str]:
    """A dataset's rows in order, of one split (``train``/``test``) or of all.

    Returns:
        (rows, split): ``split`` is ``"all"`` for anything that is not a split's name.
    """
    rows = dataset.rows.order_by("index")
    if split in SPLITS:
        return rows.filter(split=split), split
    return rows, "all"


def runs_using(dataset: Dataset) -> QuerySet:
    """Runs (training.Run) that reference this dataset.

    Looked up through the app registry, so the datasets app does not import training.
    """
    return apps.get_model("training", "Run")._default_manager.filter(dataset=dataset)


def test_row_indices(dataset: Dataset, count: int) -> list[int]:
    """The row numbers of the first ``count`` test rows, in the order a run reads them
    (``get_split``): a run's i-th sample answer is about the i-th of these."""
    rows = dataset.rows.filter(split=DatasetRow.TEST).order_by("index")
    return list(rows.values_list("index", flat=True)[: max(0, count)])
