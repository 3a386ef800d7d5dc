"""Secrets out of every text the engine keeps or shows: LM error messages and call traces.

One function, :func:`redact`, for both, so a secret that one of them would hide is never
shown by the other. It replaces the values of the environment's key, token and secret
variables, and anything shaped like a credential (``Authorization``/``Bearer`` headers,
``api_key=…`` pairs, OpenAI/Anthropic/Google/AWS/GitHub/Hugging Face key shapes).
"""

from __future__ import annotations

import os
import re

REDACTED = "[redacted]"

#: Environment variables whose values are secrets (``OPENAI_API_KEY``, ``HF_TOKEN``…).
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)

_SECRET_PATTERNS = (
    # Authorization: Bearer <token> / Basic <token>
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    # key=value, "api_key": "value", x-api-key: value, token=value ... (a "Bearer …" value is
    # left to the pattern above)
    re.compile(
        r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token|token|secret|password)"
        r"[\"']?\s*[:=]\s*[\"']?)(?!bearer\b|basic\b|\[redacted\])[^\s\"',;}]{6,}"
    ),
    # Well-known key shapes: OpenAI/Anthropic (sk-...), Google (AIza...), AWS, GitHub, HF.
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
)

# Words one of the patterns needs (lower case): a text holding none of them (most texts) is
# returned as it is after one scan, without running the patterns.
_SECRET_HINT = re.compile(
    r"bearer|basic|key|authoriz|token|secret|password|k-|aiza|akia|hf_|gh[pousr]_"
)


def is_secret_name(name: str) -> bool:
    """An environment variable that holds a secret (``OPENAI_API_KEY``, ``HF_TOKEN``…)."""
    return bool(_SECRET_NAME.search(name))


def _secret_values() -> list[str]:
    """The values of the environment's secret variables, read again only when the
    environment changed (comparing CPython's raw mapping is far cheaper than decoding and
    matching every name on each text: traces redact several texts per LM call)."""
    global _cached
    raw = getattr(os.environ, "_data", None)
    if raw is None:  # not CPython's os.environ: read it every time
        return _scan()
    snapshot, values = _cached
    if snapshot != raw:
        values = _scan()
        _cached = (dict(raw), values)
    return values


def _scan() -> list[str]:
    return [value for name, value in os.environ.items() if len(value) >= 8 and is_secret_name(name)]


_cached: tuple[dict | None, list[str]] = (None, [])


def redact(text: str) -> str:
    """``text`` with everything that is or looks like a secret replaced by ``[redacted]``."""
    if not text:
        return text
    for value in _secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    if not _SECRET_HINT.search(text.lower()):
        return text
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    for pattern in _SECRET_PATTERNS[2:]:
        text = pattern.sub(REDACTED, text)
    return text
