"""The llama.cpp binding, compiled once per machine and set of flags.

``llama-cpp-python`` has no wheel on PyPI: the lock holds its source archive's hash, and
this module compiles that archive with every core and without the parts Trainboard never
loads (:data:`LLAMA_CPP_CMAKE_ARGS`), with the AVX-512 kernels when this machine's CPU has
them (:func:`machine_cmake_args`). The wheel is kept in a folder named after the pin and the
flags (:func:`wheelhouse`), so another clone on the same machine installs it without
compiling, and a machine with other flags never takes it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from .output import Progress, phase, run_step

# llama.cpp parts Trainboard does not use: the multimodal library (mtmd, loaded only by
# llama-cpp-python's image chat handlers), the command-line programs, tests and server, the
# "common" library those programs share (see llama_cpp_bindings_only.cmake) and the GPU/BLAS
# backends (the local model runs on ggml's CPU backend). A CMAKE_ARGS set by the user comes
# last, so their own flags (e.g. -DGGML_CUDA=on) win.
BINDINGS_ONLY_CMAKE = Path(__file__).resolve().parent.parent / "llama_cpp_bindings_only.cmake"
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

#: The AVX-512 kernels ggml compiles when the CPU has the instructions (its CMake options and
#: the ``/proc/cpuinfo`` flags each needs). Measured on the 2-core AMD EPYC (Q8_0, 1 thread,
#: ``Llama.eval`` after a 75-token prefix): a 16-token suffix 61 ms against 69 ms with AVX2
#: only, a 128-token prompt 345 ms against 432 ms. Still never -march=native: AMX, the
#: instructions that crashed, is not among them.
AVX512_OPTIONS = {
    "-DGGML_AVX512=ON": {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"},
    "-DGGML_AVX512_VBMI=ON": {"avx512vbmi"},
    "-DGGML_AVX512_VNNI=ON": {"avx512_vnni"},
    "-DGGML_AVX512_BF16=ON": {"avx512_bf16"},
}
CPUINFO = Path("/proc/cpuinfo")
#: ``TRAINBOARD_LLAMA_CPU``: "auto" (the default: this CPU's AVX-512 kernels too) or
#: "portable" (the AVX2 code only: a wheel to run on another machine).
LLAMA_CPUS = ("auto", "portable")
PORTABLE_CPU = "portable"


def llama_cpu(environ: dict[str, str]) -> str:
    """``TRAINBOARD_LLAMA_CPU`` as one of :data:`LLAMA_CPUS` (any case, spaces ignored).

    Raises:
        ValueError: another value, naming the ones allowed (a typo must not build the
            AVX-512 wheel someone meant to copy elsewhere).
    """
    value = environ.get("TRAINBOARD_LLAMA_CPU", "auto").strip().lower() or "auto"
    if value not in LLAMA_CPUS:
        raise ValueError(f"TRAINBOARD_LLAMA_CPU must be auto or portable, got {value!r}")
    return value


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str]:
    """The instruction-set flags the kernel reports for this machine's CPU (its first
    ``flags`` line); empty where there is none (not Linux on x86)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return set(value.split())
    return set()


def cpu_options(flags: set[str]) -> list[str]:
    """The :data:`AVX512_OPTIONS` the CPU with ``flags`` runs: none without the base AVX-512
    set, and each extension only on top of it.

    Example:
        ```python
        cpu_options({"avx2"})  # []
        ```
    """
    base, *extensions = AVX512_OPTIONS.items()
    if not base[1] <= flags:
        return []
    return [base[0], *(option for option, needs in extensions if needs <= flags)]


def machine_cmake_args(environ: dict[str, str]) -> list[str]:
    """:data:`LLAMA_CPP_CMAKE_ARGS` and the AVX-512 options this machine's CPU runs (none
    with ``TRAINBOARD_LLAMA_CPU=portable``). They are part of the wheelhouse's name, so a
    machine without them never installs a wheel built with them."""
    if llama_cpu(environ) == PORTABLE_CPU:
        return list(LLAMA_CPP_CMAKE_ARGS)
    return [*LLAMA_CPP_CMAKE_ARGS, *cpu_options(cpu_flags())]


def cache_root(environ: dict[str, str]) -> Path:
    """``$XDG_CACHE_HOME/trainboard`` (``~/.cache/trainboard``): wheels and tools."""
    home = Path(environ.get("HOME") or Path.home())
    return Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "trainboard"


def wheelhouse(environ: dict[str, str], pin: str) -> Path:
    """Where the wheel of ``pin`` (``llama-cpp-python==X``) built with this machine's flags
    is kept.

    pip's own cache keys a built wheel by its source archive only, so it would hand back a
    wheel compiled with other flags (an older -march=native build, say); this folder is named
    after the flags and the pin, so a change of either builds again and every clone after it
    reuses the build. ``TRAINBOARD_WHEELHOUSE`` overrides the root (default
    ``~/.cache/trainboard/wheels``).
    """
    root = environ.get("TRAINBOARD_WHEELHOUSE") or str(cache_root(environ) / "wheels")
    # The include file by its content, not its path: every clone has its own path.
    args = machine_cmake_args(environ)
    portable = [arg for arg in args if str(BINDINGS_ONLY_CMAKE) not in arg]
    include = BINDINGS_ONLY_CMAKE.read_text(encoding="utf-8")
    flags = "\n".join([pin, *portable, include, environ.get("CMAKE_ARGS", "")])
    return Path(root) / hashlib.sha256(flags.encode()).hexdigest()[:16]


def build_jobs() -> int:
    """Compile jobs at once: every core plus two (ninja's own default, so a core is not left
    idle while a job waits on the disk). Set here because CMake's Makefile generator, used
    when ninja is missing, would otherwise compile one file at a time."""
    return (os.cpu_count() or 1) + 2


def build_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment the compile runs in: llama.cpp's trimmed CMake flags, every core.

    Args:
        environ: The caller's environment (``os.environ``); not modified.

    Returns:
        A copy with ``CMAKE_ARGS`` (Trainboard's flags, shell-quoted as scikit-build-core
        splits them, then the caller's) and
        ``CMAKE_BUILD_PARALLEL_LEVEL`` (:func:`build_jobs`, unless already set).
    """
    env = dict(environ)
    ours = " ".join(shlex.quote(arg) for arg in machine_cmake_args(environ))
    env["CMAKE_ARGS"] = f"{ours} {environ.get('CMAKE_ARGS', '')}".strip()
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(build_jobs()))
    return env


def built_wheel(environ: dict[str, str], pin: str) -> Path | None:
    """The wheelhouse's wheel of ``pin`` (None: not built yet)."""
    wheels = sorted(wheelhouse(environ, pin).glob("llama_cpp_python-*.whl"))
    return wheels[-1] if wheels else None


def source_wheel(environ: dict[str, str], pin: str, locked: Path, progress: Progress) -> Path:
    """The wheelhouse's wheel of ``pin``, compiled now if it has none.

    Args:
        environ: The caller's environment (the build adds :func:`build_environment`'s).
        pin: ``llama-cpp-python==X``, the wheelhouse's name.
        locked: A requirements file with the pin and its source archive's hashes (the
            lock's entry): pip checks the archive against them before it builds.
        progress: Named the current step.
    """
    if built_wheel(environ, pin) is not None:
        return built_wheel(environ, pin)
    house = wheelhouse(environ, pin)
    env = build_environment(environ)
    with phase(f"compile {pin}"):
        print(
            f"setup: compiling {pin} ({env['CMAKE_BUILD_PARALLEL_LEVEL']} jobs at once: "
            "minutes; later clones reuse the built wheel)",
            flush=True,
        )
        house.mkdir(parents=True, exist_ok=True)
        # pip builds it (uv has no "wheel" command); the bootstrap Python's pip, so any venv
        # works, in pip's isolated build environment.
        wheel = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check"]
        options = ["--no-deps", "--no-cache-dir", "--require-hashes", "-w", str(house)]
        run_step([*wheel, *options, "-r", str(locked)], env, progress)
    return sorted(house.glob("llama_cpp_python-*.whl"))[-1]


@contextmanager
def compiling_meanwhile(build: Callable[[], object]):
    """Run ``build`` (the compile) on a thread while the block runs; wait for it at the end
    of the block and re-raise its failure there.

    A cold set-up spends about two minutes compiling llama.cpp on two cores and half a
    minute downloading and linking the other packages; overlapped, the second is free.
    """
    failures: list[BaseException] = []

    def run() -> None:
        try:
            build()
        except BaseException as exc:  # re-raised on the main thread below
            failures.append(exc)

    builder = threading.Thread(target=run, name="setup-compile", daemon=True)
    builder.start()
    try:
        yield
    finally:
        builder.join()
    if failures:
        raise failures[0]
