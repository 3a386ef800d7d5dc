"""The forecast the launch form showed, carried to the launch so the run stores that one.

Why: the form's forecast and the one a launch computed a moment later could differ (a
run of the model ended in between, the machine's load moved), and then the run page's
"forecast at launch" was not what the user was shown. The form's answer carries its forecast,
signed and tied to what it was made for (program, version, dataset, configuration); a launch
with the same values within ``MAX_AGE_SECONDS`` stores it as it was shown. Anything else (a
changed field, an old page, a tampered value) is ignored and the launch forecasts anew.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core import signing

#: How long a shown forecast may be reused by a launch (a page left open longer forecasts anew).
MAX_AGE_SECONDS = 15 * 60
_SALT = "trainboard.forecast-shown"


def _digest(program: Any, version: Any, dataset: Any, config: dict[str, Any]) -> str:
    made_for = {
        "program": getattr(program, "pk", None),
        "version": getattr(version, "pk", None),
        "dataset": getattr(dataset, "pk", None),
        # a seed left blank is drawn anew by each form check; no figure depends on it
        "config": {key: value for key, value in config.items() if key != "seed"},
    }
    text = json.dumps(made_for, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def carry(program, version, dataset, config: dict[str, Any], forecast: dict[str, Any]) -> str:
    """The form's hidden value for ``forecast`` made for these launch values."""
    return signing.dumps(
        {"for": _digest(program, version, dataset, config), "forecast": forecast},
        salt=_SALT,
        compress=True,
    )


def carried(value: str | None, program, version, dataset, config: dict[str, Any]):
    """The forecast ``value`` carries when it was made for exactly these values, recently and
    by this server; else None."""
    if not value or len(value) > 200_000:
        return None
    try:
        found = signing.loads(value, salt=_SALT, max_age=MAX_AGE_SECONDS)
    except signing.BadSignature:  # a tampered or expired value (SignatureExpired is one)
        return None
    if not isinstance(found, dict) or found.get("for") != _digest(
        program, version, dataset, config
    ):
        return None
    return found.get("forecast")
