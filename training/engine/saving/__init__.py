"""Saving: the registry of serializable names and JSON (de)serialization.

The program document itself (``Program.save`` / ``load`` / ``get_config``) is built in
:mod:`training.engine.saving.program_saving`, imported by ``Program`` and not from here: it
needs the modules, which register themselves through this package.
"""

from training.engine.saving.json_io import read_json, write_json
from training.engine.saving.registry import (
    UnknownObjectError,
    get_registered_name,
    get_registered_object,
    register_synalinks_serializable,
    registered_names,
)
from training.engine.saving.serialization import deserialize, serialize

__all__ = [
    "UnknownObjectError",
    "deserialize",
    "get_registered_name",
    "get_registered_object",
    "read_json",
    "register_synalinks_serializable",
    "registered_names",
    "serialize",
    "write_json",
]
