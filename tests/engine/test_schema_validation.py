"""A variable's schema is checked once and its validator kept; the errors stay what
``jsonschema.validate`` gives (the best match, its path and message)."""

import jsonschema
import pytest

from training.engine import schema_validation
from training.engine.variables import Variable, VariableError

SCHEMA = {
    "type": "object",
    "properties": {
        "instructions": {"type": "string"},
        "examples": {"type": "array", "items": {"type": "object", "required": ["inputs"]}},
    },
    "required": ["instructions"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "value",
    [
        {"instructions": 1},
        {"examples": []},
        {"instructions": "x", "other": 1},
        {"other": 1},
        {"instructions": "x", "examples": [{"outputs": {}}]},
    ],
)
def test_a_value_off_its_schema_fails_as_jsonschema_validate_says(value):
    with pytest.raises(jsonschema.ValidationError) as expected:
        jsonschema.validate(value, SCHEMA)
    with pytest.raises(jsonschema.ValidationError) as got:
        schema_validation.validate(value, SCHEMA)
    assert (got.value.message, list(got.value.absolute_path)) == (
        expected.value.message,
        list(expected.value.absolute_path),
    )


def test_a_schema_that_is_not_one_is_refused_on_every_use():
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            schema_validation.validate({}, {"type": 12})


def test_assigning_a_variable_again_and_again_checks_its_schema_once(monkeypatch):
    checked = []
    original = jsonschema.Draft202012Validator.check_schema
    monkeypatch.setattr(
        jsonschema.Draft202012Validator,
        "check_schema",
        classmethod(lambda cls, schema: checked.append(schema) or original(schema)),
    )
    schema = {**SCHEMA, "title": "checked once"}  # a schema no other test has validated
    variable = Variable(name="v", value={"instructions": "a"}, schema=schema)
    for text in ("b", "c", "d"):
        variable.assign({"instructions": text})
    with pytest.raises(VariableError, match="at instructions"):
        variable.assign({"instructions": 3})
    assert checked == [schema]
