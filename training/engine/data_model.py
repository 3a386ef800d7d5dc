"""DataModel: the typed JSON objects that flow through programs.

A DataModel is a pydantic model with a few conveniences (``get``, ``get_json``, ``get_schema``).
Classes can also be built from plain data — ``create_data_model(name, fields)`` for the dashboard
and ``data_model_from_schema(schema)`` for ``Program.load`` — so no code is ever executed to
rebuild a saved program's types.
"""

from __future__ import annotations

import keyword
from typing import Any, Literal, get_args, get_origin

import pydantic
from pydantic import ConfigDict, Field

FIELD_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "list[str]": list[str],
}

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


class DataModel(pydantic.BaseModel):
    """Base class of every input, output and example object."""

    model_config = ConfigDict(extra="forbid")

    def get(self, field: str, default: Any = None) -> Any:
        """The value of ``field`` (JSON form), or ``default`` when the field does not exist."""
        if field in type(self).model_fields:
            value = getattr(self, field)
            if value is None or isinstance(value, str | int | float | bool):
                return value
            return self.model_dump(mode="json", include={field})[field]
        return default

    def get_json(self) -> dict[str, Any]:
        """The object as a JSON-able dict."""
        return self.model_dump(mode="json")

    def keys(self) -> list[str]:
        return list(type(self).model_fields)

    @classmethod
    def get_schema(cls) -> dict[str, Any]:
        """JSON schema of the class (title = class name, field descriptions kept)."""
        cache = cls.__dict__.get("_schema_cache")
        if cache is None:
            cache = cls.model_json_schema()
            type.__setattr__(cls, "_schema_cache", cache)
        return cache

    @classmethod
    def prettify_schema(cls) -> str:
        import json

        return json.dumps(cls.get_schema(), indent=2)


_RESERVED = set(dir(DataModel)) | {"model_config", "schema", "json", "dict", "copy", "fields"}


def _check_field_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{where}: field name {name!r} is not a valid identifier")
    if name.startswith("_"):
        raise ValueError(f"{where}: field name {name!r} may not start with '_'")
    if name in _RESERVED:
        raise ValueError(f"{where}: field name {name!r} is reserved by DataModel; choose another")
    return name


def _check_class_name(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"DataModel name {name!r} is not a valid identifier")
    return name


# Most fields one DataModel may have. Building a model costs time per field (pydantic):
# a 20,000-field schema took a minute of CPU before failing, so size is checked first.
MAX_FIELDS = 200


def _check_field_count(count: int, name: str) -> None:
    if count > MAX_FIELDS:
        raise ValueError(
            f"DataModel {name!r} has {count:,} fields; at most {MAX_FIELDS} are allowed"
        )


# A label field (``"choices"``) takes one of at most MAX_CHOICES strings of at most
# MAX_CHOICE_CHARS each: the list is in every prompt and in the local model's grammar, so it is
# bounded like the field count. Checked when building a class from a spec and from a schema.
MAX_CHOICES = 50
MAX_CHOICE_CHARS = 200


def check_choices(choices: Any, where: str) -> tuple[str, ...]:
    """The label values of a ``choices`` field spec, checked; ValueError saying what is wrong.

    A label set is at least 2 distinct, non-empty strings (one label is a constant, not a
    choice), at most :data:`MAX_CHOICES`, each at most :data:`MAX_CHOICE_CHARS` characters.
    """
    if not isinstance(choices, list | tuple) or not all(isinstance(c, str) for c in choices):
        raise ValueError(f"{where}: choices must be a list of strings, got {choices!r}")
    if len(choices) < 2 or len(choices) > MAX_CHOICES:
        raise ValueError(
            f"{where}: a label set has between 2 and {MAX_CHOICES} choices, got {len(choices)}"
        )
    if len(set(choices)) != len(choices):
        raise ValueError(f"{where}: choices must be distinct, got {list(choices)!r}")
    for choice in choices:
        if not choice or len(choice) > MAX_CHOICE_CHARS:
            raise ValueError(
                f"{where}: each choice has 1 to {MAX_CHOICE_CHARS} characters, got {choice[:40]!r}"
            )
    return tuple(choices)


def label_type(choices: Any, where: str = "label field") -> Any:
    """``Literal[...]`` of a checked label set: the type a label field is given, so its JSON
    schema carries an ``enum`` (a grammar-constrained model can only answer a listed label)."""
    return Literal[check_choices(choices, where)]  # type: ignore[valid-type]


def label_choices(annotation: Any) -> list[str] | None:
    """The labels of a ``Literal[...]`` string annotation (optional or not), else None."""
    if get_origin(annotation) is not Literal:
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(options) != 1 or get_origin(options[0]) is not Literal:
            return None
        annotation = options[0]
    values = get_args(annotation)
    return list(values) if all(isinstance(value, str) for value in values) else None


def create_data_model(name: str, fields: list[dict[str, Any]]) -> type[DataModel]:
    """Build a DataModel class from ``[{"name", "type", "description", "required"?, "choices"?}]``.

    ``type`` is one of ``str``, ``int``, ``float``, ``bool``, ``list[str]``. Fields are required
    unless ``"required": false`` (then they default to ``None``). A ``str`` field with
    ``"choices": ["negative", "neutral", "positive"]`` is a label field: its type is
    ``Literal["negative", "neutral", "positive"]`` and its schema an ``enum``.

    Example:

        Sentiment = create_data_model(
            "Sentiment", [{"name": "label", "type": "str", "choices": ["neg", "pos"]}]
        )
        Sentiment.get_schema()["properties"]["label"]["enum"]  # ["neg", "pos"]
    """
    _check_class_name(name)
    if not fields:
        raise ValueError(f"create_data_model({name!r}): at least one field is required")
    _check_field_count(len(fields), name)
    definitions: dict[str, Any] = {}
    for index, spec in enumerate(fields):
        where = f"create_data_model({name!r}) field #{index}"
        if not isinstance(spec, dict) or "name" not in spec:
            raise ValueError(f"{where}: expected a dict with 'name' and 'type', got {spec!r}")
        field_name = _check_field_name(spec["name"], where)
        if field_name in definitions:
            raise ValueError(f"{where}: duplicate field {field_name!r}")
        type_name = spec.get("type", "str")
        if type_name not in FIELD_TYPES:
            raise ValueError(f"{where}: type {type_name!r} is not one of {sorted(FIELD_TYPES)}")
        annotation = FIELD_TYPES[type_name]
        if spec.get("choices") is not None:
            if type_name != "str":
                raise ValueError(f"{where}: choices need type 'str', got {type_name!r}")
            annotation = label_type(spec["choices"], where)
        description = spec.get("description") or None
        if spec.get("required", True):
            definitions[field_name] = (annotation, Field(..., description=description))
        else:
            definitions[field_name] = (annotation | None, Field(None, description=description))
    return pydantic.create_model(name, __base__=DataModel, **definitions)


def data_model_fields(data_model: type[DataModel]) -> list[dict[str, Any]]:
    """Inverse of :func:`create_data_model` for simple classes (for forms and the dashboard)."""
    result = []
    for field_name, info in data_model.model_fields.items():
        choices = label_choices(info.annotation)
        type_name = (
            "str"
            if choices
            else next(
                (key for key, value in FIELD_TYPES.items() if value == info.annotation),
                None,
            )
        )
        if type_name is None:
            type_name = next(
                (k for k, v in FIELD_TYPES.items() if info.annotation == (v | None)), "str"
            )
        spec = {
            "name": field_name,
            "type": type_name,
            "description": info.description or "",
            "required": info.is_required(),
        }
        if choices:
            spec["choices"] = choices
        result.append(spec)
    return result


def data_model_from_schema(schema: dict[str, Any], name: str | None = None) -> type[DataModel]:
    """Rebuild a DataModel class from its JSON schema (as written by ``get_schema``).

    Supports string/integer/number/boolean, arrays of those or of objects, nested objects
    (inline or through ``$defs``/``$ref``), enums (as ``Literal``) and optional (``anyOf`` with
    null) fields. Anything else is refused with an error naming the field.
    """
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise ValueError(f"data_model_from_schema: expected an object schema, got {schema!r}")
    defs = schema.get("$defs", {})
    built: dict[str, type[DataModel]] = {}
    return _object_from_schema(schema, name or schema.get("title") or "DataModel", defs, built)


def in_field_order(properties: dict[str, Any], required: Any) -> list[tuple[str, Any]]:
    """The schema's fields in the order the data model declared them: that of ``required``
    (an array, which every JSON store keeps in order), then any others as listed. A database
    that reorders an object's keys (PostgreSQL's jsonb) thus rebuilds the same data model,
    whose field order is the order of the prompt."""
    position = {name: i for i, name in enumerate(required if isinstance(required, list) else [])}
    listed = list(enumerate(properties.items()))
    ordered = sorted(listed, key=lambda pair: (position.get(pair[1][0], len(position)), pair[0]))
    return [item for _, item in ordered]


def _object_from_schema(
    schema: dict[str, Any], name: str, defs: dict, built: dict[str, type[DataModel]]
) -> type[DataModel]:
    class_name = _check_class_name(name.replace(" ", ""))
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise ValueError(f"schema {class_name!r}: 'properties' must be an object")
    _check_field_count(len(properties), class_name)
    listed = schema.get("required", [])
    required = set(listed)
    definitions: dict[str, Any] = {}
    for field_name, field_schema in in_field_order(properties, listed):
        where = f"schema {class_name!r} field {field_name!r}"
        _check_field_name(field_name, where)
        annotation = _type_from_schema(field_schema, where, defs, built, field_name)
        description = field_schema.get("description") if isinstance(field_schema, dict) else None
        bounds = _string_bounds(field_schema)
        if field_name in required:
            definitions[field_name] = (annotation, Field(..., description=description, **bounds))
        else:
            default = field_schema.get("default") if isinstance(field_schema, dict) else None
            if default is not None or "anyOf" in field_schema:
                definitions[field_name] = (
                    annotation,
                    Field(default, description=description, **bounds),
                )
            else:
                definitions[field_name] = (
                    annotation | None,
                    Field(None, description=description, **bounds),
                )
    return pydantic.create_model(class_name, __base__=DataModel, **definitions)


def _string_bounds(field_schema: Any) -> dict[str, int]:
    """A string field's ``maxLength``/``minLength`` as pydantic constraints, so the model's
    schema keeps them (a grammar-constrained LM is then held to them)."""
    if not isinstance(field_schema, dict) or field_schema.get("type") != "string":
        return {}
    bounds = {}
    for key, name in (("maxLength", "max_length"), ("minLength", "min_length")):
        value = field_schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            bounds[name] = value
    return bounds


def _type_from_schema(
    field_schema: Any, where: str, defs: dict, built: dict, field_name: str
) -> Any:
    if not isinstance(field_schema, dict):
        raise ValueError(f"{where}: invalid schema {field_schema!r}")
    if "$ref" in field_schema:
        ref = field_schema["$ref"]
        key = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/$defs/") or key not in defs:
            raise ValueError(f"{where}: unresolvable $ref {ref!r}")
        if key not in built:
            built[key] = _object_from_schema(defs[key], defs[key].get("title", key), defs, built)
        return built[key]
    if "anyOf" in field_schema:
        options = [opt for opt in field_schema["anyOf"] if opt.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"{where}: only 'X or null' unions are supported")
        return _type_from_schema(options[0], where, defs, built, field_name) | None
    if "enum" in field_schema:
        values = field_schema["enum"]
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_CHOICES:
            raise ValueError(f"{where}: an enum has 1 to {MAX_CHOICES} values")
        if all(isinstance(value, str) for value in values) and len(values) > 1:
            return label_type(values, where)
        return Literal[tuple(values)]  # type: ignore[valid-type]
    json_type = field_schema.get("type")
    if json_type in _JSON_TYPES:
        return _JSON_TYPES[json_type]
    if json_type == "array":
        items = field_schema.get("items", {"type": "string"})
        return list[_type_from_schema(items, where, defs, built, field_name)]
    if json_type == "object":
        if field_schema.get("properties"):
            title = field_schema.get("title") or field_name.title().replace("_", "")
            return _object_from_schema(field_schema, title, defs, built)
        return dict[str, Any]
    raise ValueError(f"{where}: unsupported JSON schema type {json_type!r}")


def _required(value: Any) -> Any:
    """A ``required`` list as a set: a database that reorders a stored schema's keys (jsonb)
    rebuilds its data models with the fields in another order, and their ``required`` lists
    follow, while the schema is the same."""
    return tuple(sorted(str(item) for item in value)) if isinstance(value, list) else value


def schema_signature(schema: dict[str, Any]) -> tuple:
    """A comparable summary of a schema (field names, types, required) ignoring titles/descriptions."""

    ignored = ("title", "description", "default", "examples")

    def strip(node: Any, is_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return tuple(
                sorted(
                    (
                        key,
                        _required(value)
                        if key == "required" and not is_properties
                        else strip(value, key == "properties" and not is_properties),
                    )  # fmt: skip
                    for key, value in node.items()
                    if is_properties or key not in ignored
                )
            )
        if isinstance(node, list):
            return tuple(strip(item) for item in node)
        return node

    return strip(schema)


def is_same_schema(a: type[DataModel] | dict, b: type[DataModel] | dict) -> bool:
    schema_a = a if isinstance(a, dict) else a.get_schema()
    schema_b = b if isinstance(b, dict) else b.get_schema()
    return schema_signature(schema_a) == schema_signature(schema_b)


def extend_data_model(
    name: str, base: type[DataModel], before: dict[str, tuple[Any, Any]]
) -> type[DataModel]:
    """A new class whose fields are ``before`` followed by ``base``'s fields (ChainOfThought)."""
    definitions: dict[str, Any] = dict(before)
    for field_name, info in base.model_fields.items():
        if field_name in definitions:
            raise ValueError(f"{base.__name__} already has a field {field_name!r}")
        definitions[field_name] = (info.annotation, info)
    return pydantic.create_model(name, __base__=DataModel, **definitions)
