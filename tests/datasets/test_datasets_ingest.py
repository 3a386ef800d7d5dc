"""Unit tests for the streaming readers, profiling, type conversion, mapping and split.

No Django, no database: these exercise datasets.ingest directly on the fixture files.
"""

import io
import json
from pathlib import Path

import pytest

from datasets.ingest import DatasetError, detect_format, iter_records
from datasets.ingest.fieldtypes import ConversionError, convert, kind_of
from datasets.ingest.mapping import MappedRows, field_name_for, validate_mapping
from datasets.ingest.profile import profile_records
from datasets.ingest.splitting import split_mask
from datasets.ingest.textstream import iter_lines, iter_text_chunks

FIXTURES = Path(__file__).parent / "fixtures"


def read(name, fmt=None, encoding="utf-8"):
    fmt = fmt or detect_format(name)
    with open(FIXTURES / name, "rb") as stream:
        return list(iter_records(stream, fmt, encoding))


def profile(name):
    fmt = detect_format(name)
    with open(FIXTURES / name, "rb") as stream:
        return profile_records(iter_records(stream, fmt), sniff_strings=fmt in ("csv", "tsv"))


# --- good files ------------------------------------------------------------------------


def test_csv_rows_quotes_multiline_and_lines():
    records = read("good.csv")
    assert [r.values["question"] for r in records] == [
        "What is 2+2?",
        "Capital of France?",
        "A quote, with comma",
        "Multi\nline question",
        "What is 2+2?",
    ]
    # A quoted newline makes the 4th row span lines 5-6, so the 5th row starts on line 7.
    assert [r.line for r in records] == [2, 3, 4, 5, 7]


def test_tsv_rows():
    records = read("good.tsv")
    assert records[0].values == {"text": "I love it", "label": "positive"}
    assert len(records) == 3


def test_jsonl_skips_blank_lines_and_keeps_json_types():
    records = read("good.jsonl")
    assert [r.line for r in records] == [1, 3, 4]
    assert records[0].values["score"] == 1.5
    assert records[2].values["tags"] == ["a", "b"]


def test_json_array_pretty_printed():
    records = read("good.json")
    assert [r.values["answer"] for r in records] == ["4", "Paris", "Jupiter"]
    assert [r.line for r in records] == [2, 3, 7]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_json_array_any_chunk_boundary(chunk):
    """The sliding buffer must give the same rows whatever the chunk size (numbers too)."""
    rows = [{"a": i, "b": "x" * (i % 5), "c": 12345.5, "d": True, "e": None} for i in range(30)]
    data = json.dumps(rows, indent=1).encode()
    from datasets.ingest.json_array_reader import read_json_array

    got = list(read_json_array(iter_text_chunks(io.BytesIO(data), "utf-8", chunk_bytes=chunk)))
    assert [r.values for r in got] == rows


def test_json_array_top_level_number_split_across_chunks():
    from datasets.ingest.json_array_reader import read_json_array

    with pytest.raises(DatasetError, match="is a number, not an object"):
        list(read_json_array(iter_text_chunks(io.BytesIO(b"[12345]"), chunk_bytes=2)))


def test_utf8_bom_is_dropped_and_multibyte_split_across_chunks():
    data = "\ufeffname,city\nZoë,Zürich\n".encode()
    chunks = iter_text_chunks(io.BytesIO(data), "utf-8", chunk_bytes=1)
    assert "".join(chunks) == "name,city\nZoë,Zürich\n"
    records = list(iter_records(io.BytesIO(data), "csv"))
    assert records[0].values == {"name": "Zoë", "city": "Zürich"}


def test_other_encoding_when_chosen():
    records = read("bad_encoding.csv", encoding="latin-1")
    assert records[1].values["question"] == "café au lait"


def test_iter_lines_keeps_endings_and_last_line():
    assert list(iter_lines(["a\nb", "c\n", "d"])) == ["a\n", "bc\n", "d"]


# --- bad files: each error names what and where ---------------------------------------


def test_wrong_encoding_reports_line_and_byte():
    with pytest.raises(DatasetError) as info:
        read("bad_encoding.csv")
    error = info.value
    assert (error.line, error.byte) == (3, 27)
    assert "line 3" in str(error) and "byte offset 27" in str(error) and "0xe9" in str(error)


def test_wrong_encoding_position_is_exact_across_chunks():
    data = b"a,b\n" + b"x,y\n" * 1000 + b"\xff,z\n"
    with pytest.raises(DatasetError) as info:
        list(iter_text_chunks(io.BytesIO(data), chunk_bytes=7))
    assert (info.value.line, info.value.byte) == (1002, 4 + 4 * 1000)


def test_truncated_utf8_at_end_of_file():
    with pytest.raises(DatasetError) as info:
        list(iter_text_chunks(io.BytesIO("ab\ncé".encode()[:-1])))
    assert info.value.line == 2 and info.value.byte == 4


def test_malformed_jsonl_line_number():
    with pytest.raises(DatasetError, match=r"Malformed JSON on line 3") as info:
        read("malformed.jsonl")
    assert info.value.line == 3


def test_malformed_json_array_line_number():
    with pytest.raises(DatasetError, match=r"line 3 \(item 2") as info:
        read("malformed_array.json")
    assert info.value.line == 3


def test_json_file_that_is_not_an_array():
    with pytest.raises(DatasetError, match=r"array of objects.*\.jsonl"):
        read("not_array.json")


def test_unclosed_json_array():
    with pytest.raises(DatasetError, match="not closed"):
        list(iter_records(io.BytesIO(b'[{"a": 1},\n'), "json"))


def test_text_after_json_array():
    with pytest.raises(DatasetError, match="after the end of the JSON array on line 2"):
        list(iter_records(io.BytesIO(b'[{"a": 1}]\nmore'), "json"))


def test_jsonl_line_that_is_not_an_object():
    with pytest.raises(DatasetError, match="Line 2 holds an array"):
        list(iter_records(io.BytesIO(b'{"a": 1}\n[1, 2]\n'), "jsonl"))


def test_ragged_csv_line_number():
    with pytest.raises(DatasetError, match=r"CSV line 4 has 3 values but the header") as info:
        read("ragged.csv")
    assert info.value.line == 4


@pytest.mark.parametrize("name", ["no_rows.csv", "no_rows.jsonl"])
def test_no_rows(name):
    with pytest.raises(DatasetError, match="no rows"):
        profile(name)


def test_duplicate_column_names_csv():
    with pytest.raises(DatasetError, match=r"Duplicate column name 'question'.*columns 1 and 3"):
        read("duplicate_columns.csv")


def test_duplicate_keys_jsonl():
    with pytest.raises(DatasetError, match=r"Duplicate column name 'answer'.*line 2"):
        read("duplicate_keys.jsonl")


def test_empty_header_name():
    with pytest.raises(DatasetError, match="Column 2 of the header"):
        list(iter_records(io.BytesIO(b"a,,c\n1,2,3\n"), "csv"))


def test_line_too_long():
    with pytest.raises(DatasetError, match="longer than"):
        list(iter_lines(["x" * 50, "y" * 60], max_line_chars=100))


def test_unknown_extension():
    with pytest.raises(DatasetError, match="Cannot tell the format"):
        detect_format("data.xlsx")
    assert detect_format("data.xlsx", "csv") == "csv"
    assert detect_format("DATA.NDJSON") == "jsonl"


# --- profile ---------------------------------------------------------------------------


def test_profile_csv_counts_types_and_duplicates():
    result = profile("good.csv")
    assert result["row_count"] == 5
    assert result["duplicate_rows"] == 1  # "What is 2+2?,4,1" appears twice
    types = {c["name"]: c["type"] for c in result["columns"]}
    assert types == {"question": "str", "answer": "str", "difficulty": "int"}
    assert result["preview"][0] == ["What is 2+2?", "4", "1"]


def test_profile_jsonl_union_of_keys_and_empty_counts():
    result = profile("good.jsonl")
    columns = {c["name"]: c for c in result["columns"]}
    assert list(columns) == ["question", "answer", "score", "tags"]
    assert columns["score"]["type"] == "float"  # 1.5 and 2
    assert columns["score"]["empty"] == 1
    assert columns["tags"]["type"] == "list[str]" and columns["tags"]["empty"] == 2
    assert columns["answer"]["type"] == "str"  # "4" was written as a JSON string
    assert result["preview"][2][3] == '["a", "b"]'


def test_kind_of_sniffs_csv_strings_only():
    assert kind_of("42", sniff_strings=True) == "int"
    assert kind_of("4.5e3", sniff_strings=True) == "float"
    assert kind_of("TRUE", sniff_strings=True) == "bool"
    assert kind_of("42", sniff_strings=False) == "str"


# --- conversion and mapping ------------------------------------------------------------


def test_convert():
    assert convert("42", "int") == 42
    assert convert(3.0, "int") == 3
    assert convert("2.5", "float") == 2.5
    assert convert("yes", "bool") is True
    assert convert('["a", 1]', "list[str]") == ["a", "1"]
    assert convert(7, "str") == "7"
    for value, kind in [("4.2", "int"), (True, "int"), ("nan", "float"), ("maybe", "bool")]:
        with pytest.raises(ConversionError):
            convert(value, kind)


def test_field_name_for():
    assert field_name_for("Question Text", 1) == "question_text"
    assert field_name_for("123", 4) == "field_4"
    assert field_name_for("class", 2) == "class_"


COLUMNS = ["question", "answer", "difficulty"]


def entry(column, role, name=None, type="str"):
    return {"column": column, "role": role, "name": name or column, "type": type}


def test_mapped_column_that_does_not_exist():
    entries = json.loads((FIXTURES / "mapping_missing_column.json").read_text())
    with pytest.raises(DatasetError, match=r"mapped column 'answr' does not exist"):
        validate_mapping(entries, COLUMNS)


@pytest.mark.parametrize(
    "entries, message",
    [
        ([entry("question", "input")], "at least one column to a target"),
        ([entry("answer", "target")], "at least one column to an input"),
        ([entry("question", "input", "x"), entry("answer", "target", "x")], "unique"),
        ([entry("question", "input", "1x"), entry("answer", "target")], "must be letters"),
        ([entry("question", "input", "def"), entry("answer", "target")], "keyword"),
        ([entry("question", "input", type="date"), entry("answer", "target")], "not one of"),
        ([entry("question", "input"), entry("question", "target", "q")], "mapped twice"),
    ],
)
def test_mapping_errors(entries, message):
    with pytest.raises(DatasetError, match=message):
        validate_mapping(entries, COLUMNS)


def test_mapped_rows_convert_and_report_bad_values():
    with open(FIXTURES / "good.csv", "rb") as stream:
        mapping = validate_mapping(
            [entry("question", "input"), entry("difficulty", "target", "level", "int")], COLUMNS
        )
        rows = list(MappedRows(iter_records(stream, "csv"), mapping))
    assert rows[0] == {"question": "What is 2+2?", "level": 1}
    assert mapping.input_fields == [{"name": "question", "type": "str", "description": ""}]
    assert mapping.columns == {"question": "question", "level": "difficulty"}

    mapping = validate_mapping(
        [entry("question", "input"), entry("answer", "target", type="int")], COLUMNS
    )
    with open(FIXTURES / "good.csv", "rb") as stream:
        with pytest.raises(DatasetError, match=r"Line 3: column 'answer' value 'Paris'"):
            list(MappedRows(iter_records(stream, "csv"), mapping))


def test_mapped_rows_empty_values_skip_or_fail():
    mapping = validate_mapping(
        [entry("question", "input"), entry("score", "target", type="float")], ["question", "score"]
    )
    with open(FIXTURES / "good.jsonl", "rb") as stream:
        with pytest.raises(DatasetError, match="Line 4: column 'score' is empty"):
            list(MappedRows(iter_records(stream, "jsonl"), mapping))
    with open(FIXTURES / "good.jsonl", "rb") as stream:
        rows = MappedRows(iter_records(stream, "jsonl"), mapping, skip_incomplete=True)
        assert [r["score"] for r in rows] == [1.5, 2.0]
        assert rows.skipped == 1


# --- split -----------------------------------------------------------------------------


def test_split_is_reproducible_and_sized():
    first = split_mask(100, 0.2, seed=7)
    assert first.sum() == 20
    assert (split_mask(100, 0.2, seed=7) == first).all()
    assert not (split_mask(100, 0.2, seed=8) == first).all()
    assert split_mask(3, 0.01, seed=1).sum() == 1  # at least one test row
    assert split_mask(3, 0.9, seed=1).sum() == 2  # at least one train row


def test_split_refuses_bad_ratio_and_tiny_data():
    for ratio in (0.0, 0.005, 0.95, 1.0):
        with pytest.raises(DatasetError, match="between 0.01 and 0.9"):
            split_mask(10, ratio, seed=1)
    with pytest.raises(DatasetError, match="at least 2 rows"):
        split_mask(1, 0.5, seed=1)


def test_csv_unclosed_quote_is_an_error_not_a_swallowed_file():
    with pytest.raises(DatasetError, match="CSV line 2 cannot be read") as info:
        list(iter_records(io.BytesIO(b'a,b\n1,"unterminated\n3,4\n'), "csv"))
    assert info.value.line == 2


def test_csv_crlf_and_quoted_crlf():
    records = list(iter_records(io.BytesIO(b'a,b\r\n1,"x\r\ny"\r\n3,4\r\n'), "csv"))
    assert [r.values for r in records] == [{"a": "1", "b": "x\r\ny"}, {"a": "3", "b": "4"}]
    assert [r.line for r in records] == [2, 4]


def test_utf16_with_bom():
    data = "a\tb\n1\t2\n".encode("utf-16")
    assert [r.values for r in iter_records(io.BytesIO(data), "tsv", "utf-16")] == [
        {"a": "1", "b": "2"}
    ]


def test_json_array_item_larger_than_cap(monkeypatch):
    from datasets.ingest import json_array_reader

    monkeypatch.setattr(json_array_reader, "MAX_ITEM_CHARS", 1000)
    data = b'[{"a": 1},\n {"big": "' + b"x" * 5000 + b'"}]'
    chunks = iter_text_chunks(io.BytesIO(data), chunk_bytes=100)
    with pytest.raises(DatasetError, match=r"Item 2 of the JSON array \(starting on line 2\)"):
        list(json_array_reader.read_json_array(chunks))
