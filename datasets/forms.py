"""Forms for the upload page and the dataset-settings half of the mapping page.

The per-column mapping rows are dynamic (one per column of the file) and are read by
``mapping_rows_from_post`` rather than a Django form class.
"""

from django import forms

from datasets.ingest.fieldtypes import FIELD_TYPES
from datasets.ingest.formats import FORMATS
from datasets.ingest.mapping import LABEL_SET, field_name_for
from datasets.ingest.splitting import SEED_MAX, TEST_RATIO_MAX, TEST_RATIO_MIN
from datasets.ingest.textstream import ENCODINGS

TARGET_HINTS = {"answer", "label", "labels", "target", "output", "y", "class", "category"}
FIELD_TYPE_CHOICES = FIELD_TYPES


class UploadForm(forms.Form):
    file = forms.FileField(label="File")
    format = forms.ChoiceField(
        choices=[("", "Detect from the file name")] + list(FORMATS.items()), required=False
    )
    encoding = forms.ChoiceField(choices=list(ENCODINGS.items()), initial="utf-8", required=False)

    def clean_encoding(self):
        return self.cleaned_data.get("encoding") or "utf-8"


class DatasetSettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    test_ratio = forms.FloatField(
        min_value=TEST_RATIO_MIN,
        max_value=TEST_RATIO_MAX,
        initial=0.2,
        label="Test ratio",
        help_text=f"Share of rows held out as the test split ({TEST_RATIO_MIN}-{TEST_RATIO_MAX}).",
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=SEED_MAX,
        initial=42,
        help_text="The same seed and ratio always give the same split.",
    )
    skip_incomplete = forms.BooleanField(
        required=False, label="Skip rows with an empty value in a mapped non-text column"
    )


def default_mapping_rows(columns: list[dict]) -> list[dict]:
    """Initial mapping: columns named like answers are targets, the rest inputs (else the
    last column is the target); a target whose values look like a label set (the profile's
    ``labels``) is offered, and chosen, as one."""
    rows = []
    for position, column in enumerate(columns):
        is_target = column["name"].strip().lower() in TARGET_HINTS
        rows.append(
            {
                "index": position,
                "column": column["name"],
                "inferred": column["type"],
                "empty": column["empty"],
                "labels": column.get("labels") or [],
                "role": "target" if is_target else "input",
                "name": field_name_for(column["name"], position + 1),
                "type": column["type"],
                "description": "",
            }
        )
    if rows and not any(row["role"] == "target" for row in rows) and len(rows) > 1:
        rows[-1]["role"] = "target"
    for row in rows:
        if row["role"] == "target" and row["labels"]:
            row["type"] = LABEL_SET
    return rows


def mapping_rows_from_post(columns: list[dict], data) -> list[dict]:
    """The mapping rows as posted (to redisplay them), one per column of the file."""
    rows = default_mapping_rows(columns)
    for row in rows:
        prefix = f"col-{row['index']}-"
        if f"{prefix}role" not in data:
            continue
        row["column"] = data.get(f"{prefix}column", row["column"])
        row["role"] = data.get(f"{prefix}role", "ignore")
        row["name"] = data.get(f"{prefix}name", "")
        row["type"] = data.get(f"{prefix}type", "str")
        row["description"] = data.get(f"{prefix}description", "")
    return rows


def mapping_entries(rows: list[dict]) -> list[dict]:
    """The rows the user mapped (role input or target), as validate_mapping expects; each
    carries the labels the file's profile found in its column (never posted values)."""
    return [
        {key: row[key] for key in ("column", "role", "name", "type", "description", "labels")}
        for row in rows
        if row["role"] in ("input", "target")
    ]
