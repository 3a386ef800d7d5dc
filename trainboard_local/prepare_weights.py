"""Make the local model's Q8_0 conversion now: ``python -m trainboard_local.prepare_weights``.

``make setup`` runs this after an install (``scripts/setup_env.py``), so that a user's first run
does not pay the conversion (~2 s and llama.cpp's log). It lives apart from ``weights.py``, which
converts, and ``smollm2.py``, which knows where the shipped file is and loads the result: both
import what they need from each other's side only through this entry point (no import circle).
"""

from __future__ import annotations

import logging
import os
import sys

from trainboard_local import smollm2
from trainboard_local.errors import LocalModelError
from trainboard_local.weights import Q8_0, SHIPPED, WEIGHTS_SETTING, runtime_weights


def main() -> int:
    """Make the conversion now, once.

    Returns:
        0: the conversion is there (made now or before), or the setting runs the shipped
        file; 1: it could not be made (said on stderr; a run then loads the shipped file).
    """
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        llama_cpp = smollm2._import_llama_cpp()
        source = smollm2.gguf_path()
        path = runtime_weights(source, llama_cpp)
    except LocalModelError as error:
        print(f"local model: no conversion made: {error}", file=sys.stderr)
        return 1
    if path == source and os.environ.get(WEIGHTS_SETTING, Q8_0).strip().lower() != SHIPPED:
        return 1  # runtime_weights logged why
    print(f"local model: runs {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
