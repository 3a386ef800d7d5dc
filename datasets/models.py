"""Datasets: an uploaded file waiting for its mapping, a dataset, and its stored rows.

Rows are stored one per DatasetRow with their split, already converted to the field types,
so a run reads ``get_split`` with one indexed query and no file parsing. The original file
is kept in storage (MEDIA_ROOT) for provenance and re-download.
"""

import uuid

from django.conf import settings
from django.db import models


def upload_path(instance, filename: str) -> str:
    # A random folder per file: names never collide and are not guessable.
    return f"datasets/{instance.owner_id}/{uuid.uuid4().hex}/{filename}"


FORMAT_CHOICES = [
    ("csv", "CSV"),
    ("tsv", "TSV"),
    ("jsonl", "JSON Lines"),
    ("json", "JSON array"),
]


class Upload(models.Model):
    """A file that was uploaded and profiled, waiting for the user's field mapping."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_uploads"
    )
    file = models.FileField(upload_to=upload_path, max_length=500)
    original_name = models.CharField(max_length=255)
    format = models.CharField(max_length=10, choices=FORMAT_CHOICES)
    encoding = models.CharField(max_length=20, default="utf-8")
    size_bytes = models.BigIntegerField()
    profile = models.JSONField()  # see datasets.ingest.profile.profile_records
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.original_name

    @property
    def columns(self) -> list[str]:
        return [column["name"] for column in self.profile["columns"]]


class ReadyDatasetManager(models.Manager):
    """Datasets whose import finished: what every page, form and run may see and use."""

    def get_queryset(self):
        return super().get_queryset().filter(importing=False)


class Dataset(models.Model):
    """A named set of rows with a schema and a seeded train/test split.

    Rows are written in short transactions, one per chunk (see ``datasets.services``), so a
    large import never holds SQLite's single write lock for long. Until its last chunk
    commits the dataset is ``importing``: ``Dataset.objects`` hides it (no page, form or run
    can pick a half-made dataset), and only the import itself and the cleanup of a failed
    or abandoned import reach it, through ``Dataset.all_objects``.
    """

    SOURCE_UPLOAD = "upload"
    SOURCE_BUILTIN = "builtin"
    SOURCE_CODE = "code"  # the rows a fit in the owner's own code trained on
    SOURCE_CHOICES = [
        (SOURCE_UPLOAD, "Upload"),
        (SOURCE_BUILTIN, "Built-in"),
        (SOURCE_CODE, "From code"),
    ]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=SOURCE_CHOICES, default=SOURCE_UPLOAD)
    builtin_key = models.CharField(max_length=50, blank=True)
    original_file = models.FileField(upload_to=upload_path, max_length=500)
    original_name = models.CharField(max_length=255)
    format = models.CharField(max_length=10, choices=FORMAT_CHOICES)
    encoding = models.CharField(max_length=20, default="utf-8")
    size_bytes = models.BigIntegerField(default=0)
    row_count = models.PositiveIntegerField(default=0)
    train_count = models.PositiveIntegerField(default=0)
    test_count = models.PositiveIntegerField(default=0)
    skipped_rows = models.PositiveIntegerField(default=0)
    # Lists of {"name", "type", "description"}: a program's input and output DataModels.
    input_fields = models.JSONField(default=list)
    target_fields = models.JSONField(default=list)
    column_map = models.JSONField(default=dict)  # field name -> column in the original file
    test_ratio = models.FloatField(default=0.2)
    seed = models.IntegerField(default=42)
    # A target field whose values keep their shares in both splits (datasets/labels.py), or "".
    stratify_by = models.CharField(max_length=100, blank=True, default="")
    stats = models.JSONField(default=dict)  # the upload profile's columns and counts
    created = models.DateTimeField(auto_now_add=True)
    # True while the rows are still being written (hidden by ``objects``; see the docstring).
    importing = models.BooleanField(default=False)
    # Versions (datasets.versions): a corrected copy points at the version it was made from
    # and at the first version of its line; version numbers count up along that line.
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    root = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="descendants"
    )
    version = models.PositiveIntegerField(default=1)
    # People's marks on predictions, for the HumanMarks reward: [{"row", "expected",
    # "predicted", "reward"}] (a version's own and the ones it inherited).
    marks = models.JSONField(default=list, blank=True)

    objects = ReadyDatasetManager()
    all_objects = models.Manager()

    class Meta:
        ordering = ["-created", "-id"]
        base_manager_name = "all_objects"

    def __str__(self) -> str:
        # Versions share the name: a later one says its number (drop-downs, admin).
        return self.name if self.version == 1 else self.label

    def input_schema_fields(self) -> list[dict[str, str]]:
        """Input fields as ``[{"name", "type", "description"}]`` for create_data_model."""
        return [dict(field) for field in self.input_fields]

    def target_schema_fields(self) -> list[dict[str, str]]:
        """Target (expected output) fields, same shape as input_schema_fields.

        Without ``choices``: a label set (datasets/labels.py) constrains a program's output,
        not the ground truth a run reads."""
        return [
            {key: value for key, value in field.items() if key != "choices"}
            for field in self.target_fields
        ]

    @property
    def label(self) -> str:
        """The dataset with its version, as pages and choices name it: "Support tickets v2"
        (versions of one dataset share its name; ``datasets.versions``)."""
        return f"{self.name} v{self.version}"

    @property
    def input_names(self) -> list[str]:
        return [field["name"] for field in self.input_fields]

    @property
    def target_names(self) -> list[str]:
        return [field["name"] for field in self.target_fields]


class DatasetRow(models.Model):
    TRAIN = "train"
    TEST = "test"
    SPLIT_CHOICES = [(TRAIN, "Train"), (TEST, "Test")]

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rows")
    index = models.PositiveIntegerField()  # position among the dataset's rows, file order
    split = models.CharField(max_length=5, choices=SPLIT_CHOICES, default=TRAIN)
    data = models.JSONField()  # field name -> value, input and target fields together

    class Meta:
        ordering = ["index"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "index"], name="datasetrow_unique_index")
        ]
        indexes = [models.Index(fields=["dataset", "split", "index"])]

    def __str__(self) -> str:
        return f"{self.dataset_id}#{self.index}"


class DatasetChange(models.Model):
    """One correction a person made to one row (``datasets.versions``).

    Pending while ``version`` is null (the author's draft on ``base``); publishing the draft
    creates a new version and attaches the changes to it: its change log says what changed,
    on which row, and who changed it. Values came from a person or an LM: shown escaped.
    """

    ANSWER = "answer"
    RIGHT = "right"
    WRONG = "wrong"
    KIND_CHOICES = [
        (ANSWER, "Typed the right answer"),
        (RIGHT, "Marked a prediction right"),
        (WRONG, "Marked a prediction wrong"),
    ]

    # The version the change was made on (kept null if that version is deleted later).
    base = models.ForeignKey(
        Dataset, on_delete=models.SET_NULL, null=True, related_name="pending_changes"
    )
    version = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, null=True, blank=True, related_name="changes"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_changes"
    )
    row_index = models.PositiveIntegerField()  # DatasetRow.index (same in every version)
    split = models.CharField(max_length=5, default=DatasetRow.TRAIN)
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    before = models.JSONField(default=dict)  # the row's target fields before
    after = models.JSONField(default=dict)  # the typed answer's target fields (kind answer)
    predicted = models.JSONField(null=True, blank=True)  # the judged prediction (marks)
    # Which prediction a mark is about (``datasets.versions.mark_key``; "" for a typed
    # answer): a row may carry one answer and one mark per distinct prediction (the
    # per-example table marks the predictions before and after training apart).
    mark_key = models.CharField(max_length=64, blank=True, default="")
    run_id_source = models.PositiveIntegerField(null=True, blank=True)  # where it was seen
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["row_index", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["base", "author", "row_index", "mark_key"],
                condition=models.Q(version__isnull=True),
                name="datasetchange_one_pending_per_row_and_prediction",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} on row {self.row_index}"
