"""Validating JSON values against JSON schemas, one checked validator per schema.

Why: ``jsonschema.validate`` checks the schema itself against its meta-schema on every call,
which costs far more than checking the value. Variables are validated on every assignment (a
program load, each candidate an optimizer scores, each page that rebuilds a program), always
against the same few schemas: the schema is checked once here and its validator kept.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema

#: Distinct schemas whose validators are kept (a program has a few; LRU beyond that).
KEPT_VALIDATORS = 512


@functools.lru_cache(maxsize=KEPT_VALIDATORS)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # raises SchemaError, as jsonschema.validate does
    return cls(schema)


def validate(value: Any, schema: dict[str, Any]) -> None:
    """Raise the ``jsonschema.ValidationError`` that ``jsonschema.validate(value, schema)``
    would (the best match), or ``SchemaError`` for a schema that is not one."""
    # keys in the schema's own order: jsonschema checks keywords in that order, and which of
    # two equally relevant errors is reported follows it
    validator = _validator(json.dumps(schema))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        raise error
