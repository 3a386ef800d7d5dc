"""scripts/setup_env.py (the install `make run`/`make test` start with) and its envsetup
package: requirements.lock is installed as it is, llama.cpp is built with every core and only
the parts Trainboard uses, and a line with the elapsed time shows while the installer runs."""

import hashlib
import importlib.util
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.waiting import until

BASE_DIR = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("setup_env", BASE_DIR / "scripts" / "setup_env.py")
setup_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_env)
llama_build = setup_env.llama_build
output = sys.modules["envsetup.output"]
envsources = sys.modules["envsetup.sources"]

pytestmark = pytest.mark.smoke

LOCK = BASE_DIR / "requirements.lock"
PIN = "llama-cpp-python==0.3.36"


def test_build_environment_trims_llama_cpp_and_uses_every_core(monkeypatch):
    monkeypatch.setattr(setup_env.os, "cpu_count", lambda: 6)  # ninja's default: cores + 2
    caller = {"PATH": "/usr/bin"}

    env = llama_build.build_environment(caller)

    flags = shlex.split(env["CMAKE_ARGS"])  # how scikit-build-core reads it
    base = llama_build.LLAMA_CPP_CMAKE_ARGS
    assert flags[: len(base)] == base
    assert flags[len(base) :] == llama_build.cpu_options(llama_build.cpu_flags())
    assert "-DLLAVA_BUILD=OFF" in flags
    assert f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={llama_build.BINDINGS_ONLY_CMAKE}" in flags
    assert llama_build.BINDINGS_ONLY_CMAKE.is_file()
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "8"
    assert env["PATH"] == "/usr/bin"
    assert caller == {"PATH": "/usr/bin"}


def test_build_environment_lets_the_callers_cmake_flags_win():
    caller = {"CMAKE_ARGS": "-DGGML_CUDA=on", "CMAKE_BUILD_PARALLEL_LEVEL": "1"}

    env = llama_build.build_environment(caller)

    flags = shlex.split(env["CMAKE_ARGS"])
    assert flags[-1] == "-DGGML_CUDA=on"
    assert flags.index("-DGGML_CUDA=OFF") < flags.index("-DGGML_CUDA=on")
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "1"


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (59.9, "59 s"), (75.4, "1 min 15 s")])
def test_format_elapsed(seconds, text):
    assert output.format_elapsed(seconds) == text


def test_progress_prints_elapsed_and_step_until_stopped():
    lines = []
    interval = 0.05
    with output.Progress(interval=interval, write=lines.append) as progress:
        progress.step = "Building wheel for llama-cpp-python"
        until(lambda: len(lines) >= 2, 10, "Progress printed twice")
    printed = len(lines)
    # wall time for four more ticks: a ticker still running after the install would print
    time.sleep(4 * interval)

    assert lines[-1] == "setup: 0 s elapsed, Building wheel for llama-cpp-python"
    assert len(lines) == printed  # nothing after the install ended


def test_run_step_echoes_output_and_names_the_current_step(capsys):
    script = (
        "print('Collecting Django==5.2 (from -r requirements.txt (line 2))');"
        "print('Building wheel for llama-cpp-python (pyproject.toml): started');"
        "print('  Building wheel for llama-cpp-python (pyproject.toml): still running...')"
    )
    progress = output.Progress(interval=60)

    output.run_step([sys.executable, "-c", script], {}, progress)

    assert progress.step == "Building wheel for llama-cpp-python (pyproject.toml)"
    assert "Collecting Django==5.2 (from -r requirements.txt" in capsys.readouterr().out


def test_run_step_failure_raises_with_pips_exit_code():
    progress = output.Progress(interval=60)

    with pytest.raises(subprocess.CalledProcessError) as caught:
        output.run_step([sys.executable, "-c", "raise SystemExit(3)"], {}, progress)

    assert caught.value.returncode == 3


def test_llama_cpp_is_built_portable_not_native():
    """A -march=native build on an AMX CPU crashed in its first decode on a VM (GPF in
    libggml-cpu); the flags ask for portable AVX2 code instead."""
    flags = llama_build.LLAMA_CPP_CMAKE_ARGS
    assert "-DGGML_NATIVE=OFF" in flags
    assert "-DGGML_AVX2=ON" in flags


#: The flags line of a Zen 4 EPYC (this machine's kind), cut to what matters here.
ZEN4_FLAGS = (
    "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi2 avx512f avx512dq avx512ifma "
    "avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg"
)


def test_cpu_flags_are_read_from_the_first_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {ZEN4_FLAGS}\n\n"
        "processor\t: 1\nflags\t\t: sse avx2\n"
    )
    assert llama_build.cpu_flags(cpuinfo) == set(ZEN4_FLAGS.split())
    assert llama_build.cpu_flags(tmp_path / "absent") == set()  # not Linux: AVX2 code only


def test_avx512_kernels_are_built_only_for_a_cpu_that_has_the_instructions():
    every = list(llama_build.AVX512_OPTIONS)
    assert llama_build.cpu_options(set(ZEN4_FLAGS.split())) == every
    assert llama_build.cpu_options({"avx", "avx2", "fma", "f16c"}) == []
    # an extension without the base set (avx512bw missing) builds none of them
    assert llama_build.cpu_options(set(ZEN4_FLAGS.split()) - {"avx512bw"}) == []
    # the base set alone: no VNNI, BF16 or VBMI kernels it could not run
    base = {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
    assert llama_build.cpu_options(base) == ["-DGGML_AVX512=ON"]
    assert llama_build.cpu_options(base | {"avx512_vnni"}) == [
        "-DGGML_AVX512=ON",
        "-DGGML_AVX512_VNNI=ON",
    ]
    # AMX (what crashed as -march=native) is never asked for
    amx = llama_build.cpu_options(set(ZEN4_FLAGS.split()) | {"amx_tile", "amx_int8", "amx_bf16"})
    assert not [flag for flag in amx if "AMX" in flag]


def test_a_portable_build_leaves_the_cpu_options_out_and_keeps_another_wheel(tmp_path, monkeypatch):
    monkeypatch.setattr(llama_build, "cpu_flags", lambda: set(ZEN4_FLAGS.split()))
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    portable = {**environ, "TRAINBOARD_LLAMA_CPU": "portable"}

    assert llama_build.machine_cmake_args(environ)[-4:] == list(llama_build.AVX512_OPTIONS)
    assert llama_build.machine_cmake_args(portable) == llama_build.LLAMA_CPP_CMAKE_ARGS
    assert llama_build.wheelhouse(portable, PIN) != llama_build.wheelhouse(environ, PIN)
    lock = LOCK.read_text(encoding="utf-8")
    # the install stamp changes with the CPU options too: switching reinstalls the binding
    assert setup_env.digest(lock, environ) != setup_env.digest(lock, portable)
    monkeypatch.setattr(llama_build, "cpu_flags", lambda: {"avx2"})
    # an AVX2-only machine sharing the cache never gets the AVX-512 wheel
    assert llama_build.wheelhouse(environ, PIN) == llama_build.wheelhouse(portable, PIN)
    assert setup_env.digest(lock, environ) == setup_env.digest(lock, portable)


def test_an_unknown_llama_cpu_is_refused_by_name_not_built_as_avx512():
    assert llama_build.llama_cpu({"TRAINBOARD_LLAMA_CPU": " Portable "}) == "portable"
    assert llama_build.llama_cpu({}) == "auto"
    with pytest.raises(ValueError, match="auto or portable, got 'portabel'"):
        llama_build.machine_cmake_args({"TRAINBOARD_LLAMA_CPU": "portabel"})


def test_wheelhouse_is_named_after_the_pin_and_the_build_flags(tmp_path, monkeypatch):
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    pin = "llama-cpp-python==0.3.36"
    house = llama_build.wheelhouse(environ, pin)
    assert house.parent == tmp_path
    # the caller's own flags build (and keep) another wheel
    assert llama_build.wheelhouse({**environ, "CMAKE_ARGS": "-DGGML_CUDA=on"}, pin) != house
    with monkeypatch.context() as patched:
        patched.setattr(llama_build, "LLAMA_CPP_CMAKE_ARGS", ["-DGGML_NATIVE=ON"])
        assert llama_build.wheelhouse(environ, pin) != house
    assert llama_build.wheelhouse(environ, "llama-cpp-python==9.9.9") != house
    assert llama_build.wheelhouse(environ, pin) == house


def test_wheelhouse_is_the_same_for_every_clone(tmp_path, monkeypatch):
    """The flags name this clone's include file by path; the wheelhouse must not."""
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    house = llama_build.wheelhouse(environ, PIN)
    other = tmp_path / "elsewhere" / "llama_cpp_bindings_only.cmake"
    other.parent.mkdir()
    other.write_text(llama_build.BINDINGS_ONLY_CMAKE.read_text(encoding="utf-8"))
    flags = [
        f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={other}" if "INCLUDE=" in arg else arg
        for arg in llama_build.LLAMA_CPP_CMAKE_ARGS
    ]
    monkeypatch.setattr(llama_build, "LLAMA_CPP_CMAKE_ARGS", flags)
    monkeypatch.setattr(llama_build, "BINDINGS_ONLY_CMAKE", other)
    assert llama_build.wheelhouse(environ, PIN) == house


PIP_CONFIG = """\
:env:.find-links='/opt/wheels'
:env:.index-url='https://mirror.example/simple'
global.constraint='/etc/xdg/pip/constraints.txt'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.index-url='https://ignored.example/simple'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels /srv/more-wheels'
global.timeout='60'
"""


def test_pip_configuration_becomes_uvs_sources():
    """uv reads no pip configuration: the sources pip is configured with are handed over,
    all indexes counting alike as in pip (so a local CPU torch wins as it does for pip)."""
    sources = envsources.parse_pip_config(PIP_CONFIG)

    assert sources == {
        "find-links": ["/opt/wheels", "/srv/more-wheels"],
        "index-url": ["https://mirror.example/simple"],  # the environment wins, as in pip
        "constraint": ["/etc/xdg/pip/constraints.txt"],
        "cert": ["/etc/ssl/certs/ca-certificates.crt"],
        "extra-index-url": ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"],
    }
    args = envsources.uv_source_args(sources)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    assert args[2:] == [
        "--index-url", "https://mirror.example/simple",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--find-links", "/srv/more-wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
    ]  # fmt: skip
    assert envsources.uv_environment({}, sources)["SSL_CERT_FILE"] == sources["cert"][0]


def test_no_pip_configuration_means_pypi_alone():
    assert envsources.parse_pip_config("") == {}
    assert envsources.uv_source_args({}) == ["--index-strategy", "unsafe-best-match"]


def test_the_lock_holds_every_direct_pin_with_hashes():
    """requirements.lock is current: each pin of the requirements files is in it, and every
    entry carries its files' hashes (set-up installs with --require-hashes)."""
    lock = LOCK.read_text(encoding="utf-8")
    entries = setup_env.lock_entries(lock)

    assert setup_env.stale_pins(setup_env.read_inputs(), lock) == []
    assert not [name for name, entry in entries.items() if "--hash=sha256:" not in entry]
    assert setup_env.pin_of(entries["llama-cpp-python"]) == PIN
    # llama-cpp-python[server] (requirements-dev.txt) locked the server's packages too
    assert {"fastapi", "uvicorn", "sse-starlette", "starlette-context"} <= set(entries)


def test_the_weight_packages_are_locked_as_the_engine_names_them():
    """trainboard_local/errors.py names the same pins in its install hint."""
    spec = importlib.util.spec_from_file_location(
        "local_errors", BASE_DIR / "trainboard_local" / "errors.py"
    )
    errors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(errors)
    nodeps = (BASE_DIR / setup_env.NO_DEPS_INPUT).read_text(encoding="utf-8")
    entries = setup_env.lock_entries(LOCK.read_text(encoding="utf-8"))

    for name, version in errors.WEIGHT_PACKAGES.items():
        assert f"{name}=={version}" in nodeps.splitlines()
        assert setup_env.pin_of(entries[name]) == f"{name}=={version}"


LOCK_TEXT = """\
# This file was autogenerated by uv via the following command:
#    python3 scripts/setup_env.py --lock
django==5.2.19 \\
    --hash=sha256:aaaa
    # via -r requirements.txt
llama-cpp-python==0.3.36 \\
    --hash=sha256:bbbb
    # via
    #   -r requirements-dev.txt
    #   -r requirements-local.txt
torch==2.13.0+cpu \\
    --hash=sha256:cccc
zope-interface==8.7 \\
    --hash=sha256:dddd
"""


def test_a_lock_is_read_entry_by_entry():
    entries = setup_env.lock_entries(LOCK_TEXT)

    assert list(entries) == ["django", "llama-cpp-python", "torch", "zope-interface"]
    assert entries["llama-cpp-python"].splitlines()[1] == "    --hash=sha256:bbbb"
    assert entries["llama-cpp-python"].splitlines()[-1] == "    #   -r requirements-local.txt"
    assert setup_env.pin_of(entries["torch"]) == "torch==2.13.0+cpu"


def test_a_pin_the_lock_does_not_hold_stops_the_set_up_by_name():
    current = {
        "requirements.txt": "# web\nDjango==5.2.19\ntorch==2.13.0\nzope.interface==8.7\n",
        "requirements-dev.txt": "llama-cpp-python[server]\n",
    }
    assert setup_env.stale_pins(current, LOCK_TEXT) == []  # 2.13.0 takes 2.13.0+cpu

    edited = {"requirements.txt": "Django==5.2.20\nredis==8.1.0\n"}
    assert setup_env.stale_pins(edited, LOCK_TEXT) == [
        "requirements.txt: Django==5.2.20 (locked: Django==5.2.19)",
        "requirements.txt: redis==8.1.0 (locked: not locked)",
    ]


def test_the_stamp_holds_the_lock():
    assert setup_env.digest(LOCK_TEXT, {}) == setup_env.digest(LOCK_TEXT, {})
    assert setup_env.digest(LOCK_TEXT, {}) != setup_env.digest(LOCK_TEXT + "redis==8.1.0\n", {})


@pytest.fixture
def installs(tmp_path, monkeypatch):
    """The installer's commands, each with the text of the files it was given to install;
    a wheelhouse that already holds the binding's wheel."""
    done = []

    def record(args, env, progress):
        files = [Path(args[i + 1]).read_text() for i, arg in enumerate(args) if arg == "-r"]
        done.append((args, files))

    wheel = tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    monkeypatch.setattr(setup_env, "run_step", record)
    monkeypatch.setattr(llama_build, "built_wheel", lambda environ, pin: wheel)
    configured = {"constraint": ["/etc/c.txt"], "find-links": ["/opt/wheels"]}
    monkeypatch.setattr(setup_env, "pip_sources", lambda environ: configured)
    return done, wheel


def test_the_lock_installs_hashed_without_resolving_the_binding_from_the_wheelhouse(installs):
    done, wheel = installs

    setup_env.install(Path("/bin/uv"), Path("/venv/python"), LOCK_TEXT, {}, output.Progress())

    (rest_args, [rest]), (wheel_args, [built]) = done
    for args in (rest_args, wheel_args):
        assert {"--require-hashes", "--no-deps"} <= set(args)
        assert "--find-links" in args
        assert "--constraint" not in args  # the lock pins; uv refuses unpinned lines
    assert "llama-cpp-python" not in rest
    assert setup_env.lock_entries(rest).keys() == {"django", "torch", "zope-interface"}
    sha256 = hashlib.sha256(b"wheel").hexdigest()
    assert built == f"llama-cpp-python @ {wheel.as_uri()} --hash=sha256:{sha256}\n"
    assert wheel_args[-4:-2] == ["--reinstall-package", "llama-cpp-python"]


def test_pip_installs_the_same_lines_the_same_way(installs):
    done, _ = installs

    setup_env.install(None, Path("/venv/python"), LOCK_TEXT, {}, output.Progress())

    (rest_args, [rest]), (wheel_args, [built]) = done
    assert rest_args[:4] == ["/venv/python", "-m", "pip", "install"]
    assert {"--require-hashes", "--no-deps"} <= set(rest_args) & set(wheel_args)
    assert "--force-reinstall" in wheel_args and "--force-reinstall" not in rest_args
    assert built.startswith("llama-cpp-python @ file://")


def test_a_lock_without_the_source_binding_installs_as_it_is(installs):
    done, _ = installs
    prebuilt = LOCK_TEXT.replace("llama-cpp-python==0.3.36", "llama-cpp-prebuilt==1.0")

    setup_env.install(Path("/bin/uv"), Path("/venv/python"), prebuilt, {}, output.Progress())

    [(args, [rest])] = done
    assert "llama-cpp-prebuilt==1.0" in rest
    assert "--reinstall-package" not in args


def test_bytecode_is_compiled_at_install_only_where_python_cannot_cache_it():
    assert setup_env.compile_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}) is True
    assert setup_env.compile_bytecode({}) is False


def test_the_binding_compiles_while_the_other_packages_install():
    """The block (the other packages' install) runs while the compile has not finished: the
    compile waits for a signal only the block gives, so run one after the other they would
    never end."""
    block_ran = threading.Event()
    compiled = []

    def compile_after_the_block_started():
        assert block_ran.wait(10), "the compile ran before the install, not beside it"
        compiled.append(True)

    with llama_build.compiling_meanwhile(compile_after_the_block_started):
        block_ran.set()
    assert compiled == [True]  # and the block's end waited for it


def test_a_failed_compile_fails_the_set_up_after_the_install():
    def failing_compile():
        raise subprocess.CalledProcessError(1, ["pip", "wheel"])

    with pytest.raises(subprocess.CalledProcessError):
        with llama_build.compiling_meanwhile(failing_compile):
            pass


def test_setup_converts_the_local_weights_and_only_warns_when_it_cannot(monkeypatch, capfd):
    assert setup_env.CONVERT_WEIGHTS == ["-m", "trainboard_local.prepare_weights"]
    python = Path(sys.executable)
    monkeypatch.setattr(setup_env, "CONVERT_WEIGHTS", ["-c", "import sys; sys.exit(0)"])
    assert setup_env.convert_weights(python, {}) is True
    printed = capfd.readouterr().out
    assert "setup: phase convert the local model's weights:" in printed
    assert "warning" not in printed
    monkeypatch.setattr(setup_env, "CONVERT_WEIGHTS", ["-c", "import sys; sys.exit(1)"])
    assert setup_env.convert_weights(python, {}) is False  # no exception: setup goes on
    assert "setup: warning: the local model's weights were not converted" in capfd.readouterr().out
