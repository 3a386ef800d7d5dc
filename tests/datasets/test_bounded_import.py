"""Large imports write in short transactions: other writers are never stuck behind one.

A dataset is created ``importing`` (hidden from every page, form and run), its rows are
committed chunk by chunk, and it is published in one short write after the last chunk; a
failed or abandoned import is deleted, so nothing half-made is ever used.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError, connection
from django.utils import timezone

from datasets import selectors, services
from datasets.ingest import DatasetError
from datasets.models import Dataset, DatasetRow, Upload

pytestmark = pytest.mark.django_db(transaction=True)

MAPPING = [
    {"column": "question", "role": "input", "name": "question", "type": "str"},
    {"column": "answer", "role": "target", "name": "answer", "type": "float"},
]


def csv_upload(owner, rows: int, bad_line: int | None = None) -> Upload:
    lines = ["question,answer"]
    for index in range(rows):
        answer = "not a number" if bad_line == index + 2 else str(index)
        lines.append(f"what is {index}?,{answer}")
    data = ("\n".join(lines) + "\n").encode()
    return services.save_upload(owner, SimpleUploadedFile("big.csv", data))


def create(upload: Upload) -> Dataset:
    return services.create_dataset_from_upload(
        upload, name="Big", mapping_entries=MAPPING, test_ratio=0.2, seed=3
    )


def test_rows_are_committed_in_chunks_while_the_dataset_stays_hidden(
    alice, media_root, monkeypatch
):
    monkeypatch.setattr(services, "INSERT_BATCH", 100)
    upload = csv_upload(alice, 4000)
    seen: list[tuple[int, bool] | None] = []  # (committed rows, dataset visible), or locked
    read_records = services.iter_records

    def look_from_another_connection():
        try:
            seen.append((DatasetRow.objects.count(), Dataset.objects.exists()))
        except DatabaseError:  # the import's transaction holds the table
            seen.append(None)
        finally:
            connection.close()

    def records_watched(*args):  # the import reads its next records between chunk writes
        for number, record in enumerate(read_records(*args)):
            if number and number % 1000 == 0:
                watcher = threading.Thread(target=look_from_another_connection)
                watcher.start()
                watcher.join()
            yield record

    monkeypatch.setattr(services, "iter_records", records_watched)
    dataset = create(upload)

    assert seen == [(1000, False), (2000, False), (3000, False)]
    assert (dataset.row_count, dataset.train_count + dataset.test_count) == (4000, 4000)
    assert Dataset.objects.get() == dataset and not dataset.importing


def test_a_failed_import_removes_every_committed_chunk(alice, media_root, monkeypatch):
    monkeypatch.setattr(services, "INSERT_BATCH", 100)
    upload = csv_upload(alice, 3000, bad_line=2500)
    with pytest.raises(DatasetError, match="Line 2500"):
        create(upload)
    assert not Dataset.all_objects.exists() and not DatasetRow.objects.exists()
    assert Upload.objects.get() == upload  # the user can fix the mapping and try again


def test_an_import_in_progress_is_hidden_and_an_abandoned_one_is_discarded(alice, media_root):
    def half_made(age: timedelta) -> Dataset:
        dataset = Dataset.all_objects.create(owner=alice, name="half", importing=True)
        Dataset.all_objects.filter(pk=dataset.pk).update(created=timezone.now() - age)
        DatasetRow.objects.bulk_create(
            DatasetRow(dataset=dataset, index=index, data={"q": index}) for index in range(7)
        )
        return dataset

    in_progress = half_made(timedelta(minutes=5))
    abandoned = half_made(services.STALE_UPLOAD_AGE + timedelta(hours=1))
    assert not selectors.datasets_of(alice).exists()
    with pytest.raises(Exception, match="No Dataset matches"):
        selectors.owned_dataset(alice, in_progress.pk)

    csv_upload(alice, 3)  # each new upload sweeps imports that died with their process
    assert list(Dataset.all_objects.values_list("pk", flat=True)) == [in_progress.pk]
    assert not DatasetRow.objects.filter(dataset_id=abandoned.pk).exists()
    assert DatasetRow.objects.filter(dataset=in_progress).count() == 7
