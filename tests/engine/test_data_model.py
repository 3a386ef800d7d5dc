"""DataModel helpers: get/get_json/schema, building classes from fields and from schemas."""

import pydantic
import pytest

import training.engine as synalinks
from training.engine.data_model import (
    create_data_model,
    data_model_fields,
    data_model_from_schema,
    is_same_schema,
    schema_signature,
)


class Answer(synalinks.DataModel):
    answer: str
    confidence: float = 0.5


def test_get_and_get_json():
    item = Answer(answer="4")
    assert item.get("answer") == "4"
    assert item.get("missing", "default") == "default"
    assert item.get_json() == {"answer": "4", "confidence": 0.5}
    schema = Answer.get_schema()
    assert schema["title"] == "Answer" and schema["required"] == ["answer"]


def test_extra_fields_are_refused():
    import pydantic

    with pytest.raises(pydantic.ValidationError, match="other"):
        Answer(answer="4", other=1)


def test_create_data_model_and_back():
    fields = [
        {"name": "question", "type": "str", "description": "What is asked"},
        {"name": "n", "type": "int", "description": ""},
        {"name": "tags", "type": "list[str]", "description": "labels", "required": False},
    ]
    Q = synalinks.create_data_model("Question", fields)
    item = Q(question="q", n=2)
    assert item.get_json() == {"question": "q", "n": 2, "tags": None}
    assert Q.get_schema()["properties"]["question"]["description"] == "What is asked"
    assert [f["name"] for f in data_model_fields(Q)] == ["question", "n", "tags"]
    assert data_model_fields(Q)[2]["required"] is False


@pytest.mark.parametrize(
    "fields, message",
    [
        ([{"name": "bad name", "type": "str"}], "not a valid identifier"),
        ([{"name": "x", "type": "dict"}], "not one of"),
        ([{"name": "get", "type": "str"}], "reserved"),
        ([{"name": "x"}, {"name": "x"}], "duplicate"),
        ([], "at least one field"),
    ],
)
def test_create_data_model_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        synalinks.create_data_model("Thing", fields)


def test_schema_round_trip_without_code():
    class Inner(synalinks.DataModel):
        label: str

    class Outer(synalinks.DataModel):
        items: list[Inner]
        choice: str | None = None
        count: int = 3

    rebuilt = synalinks.data_model_from_schema(Outer.get_schema())
    assert rebuilt.__name__ == "Outer"
    assert is_same_schema(rebuilt, Outer)
    value = rebuilt.model_validate({"items": [{"label": "a"}]})
    assert value.get("items") == [{"label": "a"}] and value.get("count") == 3


def test_schema_rebuild_refuses_unknown_types():
    with pytest.raises(ValueError, match="unsupported"):
        synalinks.data_model_from_schema(
            {"title": "T", "type": "object", "properties": {"x": {"type": "weird"}}}
        )


def test_schema_rebuild_keeps_string_length_bounds():
    schema = {
        "type": "object",
        "properties": {
            "instructions": {"type": "string", "maxLength": 40},
            "code": {"type": "string", "minLength": 2, "maxLength": 5},
        },
        "required": ["instructions", "code"],
    }
    model = data_model_from_schema(schema, name="Bounded")
    rebuilt = model.get_schema()["properties"]
    assert rebuilt["instructions"]["maxLength"] == 40
    assert (rebuilt["code"]["minLength"], rebuilt["code"]["maxLength"]) == (2, 5)
    with pytest.raises(pydantic.ValidationError):
        model(instructions="x" * 41, code="abc")


def test_a_schema_whose_keys_a_store_reordered_rebuilds_the_same_data_model():
    Ticket = create_data_model(
        "Ticket",
        [
            {"name": "text", "type": "str", "description": "The message."},
            {"name": "priority", "type": "int", "description": "1 to 5."},
            {"name": "tags", "type": "list[str]", "description": "Free tags."},
        ],
    )
    schema = Ticket.get_schema()
    # what PostgreSQL's jsonb gives back: an object's keys by length, then bytes
    reordered = {**schema, "properties": dict(sorted(schema["properties"].items(),
                                                     key=lambda kv: (len(kv[0]), kv[0])))}  # fmt: skip
    assert list(reordered["properties"]) == ["tags", "text", "priority"]
    rebuilt = data_model_from_schema(reordered, "Ticket")
    assert list(rebuilt.model_fields) == ["text", "priority", "tags"]
    assert rebuilt.get_schema() == schema
    assert schema_signature(reordered) == schema_signature(schema)
