"""Label sets: a dataset target with few distinct values, declared as the labels a program's
output takes (a ``Literal``/``enum`` field, see ``training.engine.data_model``).

A target field's label-set state lives on the field itself (``Dataset.target_fields``):

- ``"choices": ["negative", "neutral", "positive"]``: declared, the program form uses it;
- ``"choices": []``: the owner chose free text;
- no ``"choices"`` key: undecided. When the field *looks like a label* (a ``str`` field with
  few distinct, short values relative to its rows: :func:`looks_like_label`) the label set is
  proposed, i.e. used by default, until the owner says otherwise.

Also here: each field's label distribution per split (for the dataset page) and the
stratified re-split (``datasets.ingest.splitting.stratified_split_mask``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform

from datasets.ingest.errors import DatasetError
from datasets.ingest.label_guess import looks_like_label
from datasets.ingest.splitting import stratified_split_mask
from datasets.models import Dataset, DatasetRow
from datasets.selectors import runs_using
from training.engine.data_model import MAX_CHOICE_CHARS, MAX_CHOICES

#: Rows updated per statement when re-splitting.
UPDATE_BATCH = 500


@dataclass
class LabelProfile:
    """One str target field: its values' counts per split and its label-set state."""

    name: str
    distinct: int  # distinct values (counted up to MAX_CHOICES + 1)
    rows: list[tuple[str, int, int]] = field(default_factory=list)  # (value, train, test)
    state: str = "free"  # declared | proposed | free (chosen) | undecided | not-a-label
    looks_like_label: bool = False

    @property
    def values(self) -> list[str]:
        return sorted(value for value, _train, _test in self.rows)

    @property
    def choices(self) -> list[str] | None:
        """The label set a new program uses for this field, or None (free text)."""
        return self.values if self.state in ("declared", "proposed") else None

    @property
    def can_declare(self) -> bool:
        values = self.values
        return 2 <= len(values) <= MAX_CHOICES and all(
            0 < len(value) <= MAX_CHOICE_CHARS for value in values
        )


def distribution(dataset: Dataset, name: str) -> tuple[int, list[tuple[str, int, int]]]:
    """(distinct values, [(value, train rows, test rows)] most frequent first).

    Grouped by the database; at most ``MAX_CHOICES + 1`` groups are read, enough to tell a
    label set from free text. Rows without the value are not counted.
    """
    groups = (
        DatasetRow.objects.filter(dataset=dataset)
        .annotate(value=KeyTextTransform(name, "data"))
        .exclude(value__isnull=True)
        .values("value")
        .annotate(
            total=Count("id"),
            train=Count("id", filter=Q(split=DatasetRow.TRAIN)),
            test=Count("id", filter=Q(split=DatasetRow.TEST)),
        )
        .order_by("-total", "value")[: MAX_CHOICES + 1]
    )
    rows = [(group["value"], group["train"], group["test"]) for group in groups]
    return len(rows), rows


def profiles(dataset: Dataset) -> list[LabelProfile]:
    """A :class:`LabelProfile` for each ``str`` target field of the dataset."""
    result = []
    for spec in dataset.target_fields:
        if spec.get("type", "str") != "str":
            continue
        distinct, rows = distribution(dataset, spec["name"])
        profile = LabelProfile(name=spec["name"], distinct=distinct, rows=rows)
        profile.looks_like_label = distinct <= MAX_CHOICES and looks_like_label(
            profile.values, dataset.row_count
        )
        declared = spec.get("choices")
        if declared:
            profile.state = "declared"
        elif declared == []:
            profile.state = "free"
        elif profile.looks_like_label:
            profile.state = "proposed"
        else:
            profile.state = "undecided" if profile.can_declare else "not-a-label"
        if profile.state == "declared":
            profile.rows.sort(key=lambda row: declared.index(row[0]) if row[0] in declared else 0)
        result.append(profile)
    return result


def label_sets(dataset: Dataset) -> dict[str, list[str]]:
    """``{target field: labels}`` a new program from this dataset uses (declared or proposed)."""
    declared = {spec["name"]: spec.get("choices") for spec in dataset.target_fields}
    result = {}
    for profile in profiles(dataset):
        if profile.state == "declared":
            result[profile.name] = list(declared[profile.name])
        elif profile.choices:
            result[profile.name] = profile.choices
    return result


def program_target_fields(dataset: Dataset, use_label_sets: bool) -> list[dict]:
    """The dataset's target fields as a program's output spec: with ``choices`` on each label
    field when ``use_label_sets``, plain ``str`` otherwise."""
    sets = label_sets(dataset) if use_label_sets else {}
    fields = []
    for spec in dataset.target_schema_fields():
        spec.pop("choices", None)
        if spec["name"] in sets:
            spec["choices"] = sets[spec["name"]]
        fields.append(spec)
    return fields


def set_label_set(dataset: Dataset, name: str, declare: bool) -> list[str] | None:
    """Declare field ``name``'s distinct values as its label set, or choose free text.

    Returns:
        The declared labels, or None when free text was chosen.

    Raises:
        DatasetError: the field is not a str target, or its values cannot be a label set.
    """
    profile = next((p for p in profiles(dataset) if p.name == name), None)
    if profile is None:
        raise DatasetError(f"“{name}” is not a text target field of this dataset.")
    if declare and not profile.can_declare:
        raise DatasetError(
            f"“{name}” has {profile.distinct if profile.distinct <= MAX_CHOICES else 'too many'} "
            f"distinct values; a label set has 2 to {MAX_CHOICES}, each 1 to "
            f"{MAX_CHOICE_CHARS} characters."
        )
    choices = profile.values if declare else []
    dataset.target_fields = [
        {**spec, "choices": choices} if spec["name"] == name else spec
        for spec in dataset.target_fields
    ]
    dataset.save(update_fields=["target_fields"])
    return choices or None


def stratify(dataset: Dataset, name: str) -> None:
    """Re-split the dataset (same test ratio and seed) so each value of ``name`` keeps its
    share in both splits. Refused while runs use the dataset: their scores were measured on
    the current split."""
    if name not in dataset.target_names:
        raise DatasetError(f"“{name}” is not a target field of this dataset.")
    runs = runs_using(dataset).count()
    if runs:
        raise DatasetError(
            f"{runs} run{'s' if runs != 1 else ''} use{'' if runs != 1 else 's'} this dataset's "
            "split; a new split would make their scores incomparable. Delete them first."
        )
    pairs = list(
        dataset.rows.order_by("index")
        .annotate(value=KeyTextTransform(name, "data"))
        .values_list("index", "value")
    )
    mask = stratified_split_mask(
        [value for _index, value in pairs], dataset.test_ratio, dataset.seed
    )
    test = [index for (index, _value), is_test in zip(pairs, mask, strict=True) if is_test]
    with transaction.atomic():
        dataset.rows.update(split=DatasetRow.TRAIN)
        for start in range(0, len(test), UPDATE_BATCH):
            dataset.rows.filter(index__in=test[start : start + UPDATE_BATCH]).update(
                split=DatasetRow.TEST
            )
        dataset.test_count = len(test)
        dataset.train_count = len(pairs) - len(test)
        dataset.stratify_by = name
        dataset.save(update_fields=["test_count", "train_count", "stratify_by"])
