"""pip's package sources, handed to uv.

uv reads no pip configuration, so the sources pip is configured with (``index-url``,
``extra-index-url``, ``find-links``, ``constraint``, ``cert``) become uv's flags, and all
indexes count alike (``--index-strategy unsafe-best-match``, pip's own rule): where pip finds
the CPU build of torch on a local index, uv takes the same file, when it writes the lock and
when it installs from it. ``TRAINBOARD_EXTRA_INDEX_URL`` adds indexes of your own.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

# pip configuration keys that say where packages come from, and how uv spells each.
PIP_SOURCE_OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
PIP_CONFIG_LINE = re.compile(r"^(?P<where>[^.]*)\.(?P<key>[a-z-]+)=(?P<value>.*)$")


def parse_pip_config(listing: str) -> dict[str, list[str]]:
    """``pip config list`` output -> {"index-url": [...], "find-links": [...], ...}.

    Every scope pip reads (``global.``, ``install.``, ``:env:.`` for ``PIP_*`` variables)
    counts; the values of a key are split on whitespace (pip's own multi-value syntax) and
    kept once each, in order. ``index-url`` keeps one value: the environment's, else the
    last file's (pip's precedence).

    Example:
        >>> parse_pip_config("global.find-links='/opt/wheels'\\n")
        {'find-links': ['/opt/wheels']}
    """
    found: dict[str, list[str]] = {}
    entries = [PIP_CONFIG_LINE.match(line.strip()) for line in listing.splitlines()]
    entries = [m for m in entries if m and m["where"] in ("global", "install", ":env:")]
    entries.sort(key=lambda m: m["where"] == ":env:")  # the environment last: it wins
    for match in entries:
        key = match["key"]
        if key not in (*PIP_SOURCE_OPTIONS, "cert"):
            continue
        values = [part for value in shlex.split(match["value"]) for part in value.split()]
        if key in ("index-url", "cert"):
            found[key] = values[-1:]
        else:
            bucket = found.setdefault(key, [])
            bucket.extend(value for value in values if value not in bucket)
    return {key: values for key, values in found.items() if values}


def pip_sources(environ: dict[str, str]) -> dict[str, list[str]]:
    """Where pip is configured to find packages (see :func:`parse_pip_config`), plus
    ``TRAINBOARD_EXTRA_INDEX_URL`` (space-separated) as extra indexes; {} without pip."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    ).stdout
    sources = parse_pip_config(listing)
    extra = environ.get("TRAINBOARD_EXTRA_INDEX_URL", "").split()
    if extra:
        bucket = sources.setdefault("extra-index-url", [])
        bucket.extend(url for url in extra if url not in bucket)
    return sources


def uv_source_args(sources: dict[str, list[str]]) -> list[str]:
    """uv's flags for pip's sources: the same indexes, links and constraints, all indexes
    counting alike as in pip (uv would otherwise take a package only from the first index
    that has it, e.g. a CUDA torch from an index that lacks the CPU build's version)."""
    args = ["--index-strategy", "unsafe-best-match"]
    for key, flag in PIP_SOURCE_OPTIONS.items():
        for value in sources.get(key, []):
            args += [flag, value]
    return args


def uv_environment(env: dict[str, str], sources: dict[str, list[str]]) -> dict[str, str]:
    """pip's ``cert`` as uv's ``SSL_CERT_FILE`` (unless set); no progress bars (CI logs)."""
    env = dict(env)
    if sources.get("cert"):
        env.setdefault("SSL_CERT_FILE", sources["cert"][0])
    env.setdefault("UV_NO_PROGRESS", "1")
    return env
