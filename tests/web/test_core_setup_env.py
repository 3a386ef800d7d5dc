"""scripts/setup_env.py (the install `make run`/`make test` start with): llama.cpp is built
with every core and only the parts Trainboard uses, and a line with the elapsed time shows
while pip runs."""

import importlib.util
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("setup_env", BASE_DIR / "scripts" / "setup_env.py")
setup_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_env)

pytestmark = pytest.mark.smoke


def test_build_environment_trims_llama_cpp_and_uses_every_core(monkeypatch):
    monkeypatch.setattr(setup_env.os, "cpu_count", lambda: 6)  # ninja's default: cores + 2
    caller = {"PATH": "/usr/bin"}

    env = setup_env.build_environment(caller)

    flags = shlex.split(env["CMAKE_ARGS"])  # how scikit-build-core reads it
    base = setup_env.LLAMA_CPP_CMAKE_ARGS
    assert flags[: len(base)] == base
    assert flags[len(base) :] == setup_env.cpu_options(setup_env.cpu_flags())
    assert "-DLLAVA_BUILD=OFF" in flags
    assert f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={setup_env.BINDINGS_ONLY_CMAKE}" in flags
    assert setup_env.BINDINGS_ONLY_CMAKE.is_file()
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "8"
    assert env["PATH"] == "/usr/bin"
    assert caller == {"PATH": "/usr/bin"}


def test_build_environment_lets_the_callers_cmake_flags_win():
    caller = {"CMAKE_ARGS": "-DGGML_CUDA=on", "CMAKE_BUILD_PARALLEL_LEVEL": "1"}

    env = setup_env.build_environment(caller)

    flags = shlex.split(env["CMAKE_ARGS"])
    assert flags[-1] == "-DGGML_CUDA=on"
    assert flags.index("-DGGML_CUDA=OFF") < flags.index("-DGGML_CUDA=on")
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "1"


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (59.9, "59 s"), (75.4, "1 min 15 s")])
def test_format_elapsed(seconds, text):
    assert setup_env.format_elapsed(seconds) == text


def test_progress_prints_elapsed_and_step_until_stopped():
    lines = []
    with setup_env.Progress(interval=0.05, write=lines.append) as progress:
        progress.step = "Building wheel for llama-cpp-python"
        time.sleep(0.3)
    printed = len(lines)
    time.sleep(0.2)

    assert printed >= 2
    assert lines[-1] == "setup: 0 s elapsed, Building wheel for llama-cpp-python"
    assert len(lines) == printed  # nothing after the install ended


def test_run_step_echoes_output_and_names_the_current_step(capsys):
    script = (
        "print('Collecting Django==5.2 (from -r requirements.txt (line 2))');"
        "print('Building wheel for llama-cpp-python (pyproject.toml): started');"
        "print('  Building wheel for llama-cpp-python (pyproject.toml): still running...')"
    )
    progress = setup_env.Progress(interval=60)

    setup_env.run_step([sys.executable, "-c", script], {}, progress)

    assert progress.step == "Building wheel for llama-cpp-python (pyproject.toml)"
    assert "Collecting Django==5.2 (from -r requirements.txt" in capsys.readouterr().out


def test_run_step_failure_raises_with_pips_exit_code():
    progress = setup_env.Progress(interval=60)

    with pytest.raises(subprocess.CalledProcessError) as caught:
        setup_env.run_step([sys.executable, "-c", "raise SystemExit(3)"], {}, progress)

    assert caught.value.returncode == 3


def test_llama_cpp_is_built_portable_not_native():
    """A -march=native build on an AMX CPU crashed in its first decode on a VM (GPF in
    libggml-cpu); the flags ask for portable AVX2 code instead."""
    flags = setup_env.LLAMA_CPP_CMAKE_ARGS
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
    assert setup_env.cpu_flags(cpuinfo) == set(ZEN4_FLAGS.split())
    assert setup_env.cpu_flags(tmp_path / "absent") == set()  # not Linux: AVX2 code only


def test_avx512_kernels_are_built_only_for_a_cpu_that_has_the_instructions():
    every = list(setup_env.AVX512_OPTIONS)
    assert setup_env.cpu_options(set(ZEN4_FLAGS.split())) == every
    assert setup_env.cpu_options({"avx", "avx2", "fma", "f16c"}) == []
    # an extension without the base set (avx512bw missing) builds none of them
    assert setup_env.cpu_options(set(ZEN4_FLAGS.split()) - {"avx512bw"}) == []
    # the base set alone: no VNNI, BF16 or VBMI kernels it could not run
    base = {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
    assert setup_env.cpu_options(base) == ["-DGGML_AVX512=ON"]
    assert setup_env.cpu_options(base | {"avx512_vnni"}) == [
        "-DGGML_AVX512=ON",
        "-DGGML_AVX512_VNNI=ON",
    ]
    # AMX (what crashed as -march=native) is never asked for
    amx = setup_env.cpu_options(set(ZEN4_FLAGS.split()) | {"amx_tile", "amx_int8", "amx_bf16"})
    assert not [flag for flag in amx if "AMX" in flag]


def test_a_portable_build_leaves_the_cpu_options_out_and_keeps_another_wheel(tmp_path, monkeypatch):
    monkeypatch.setattr(setup_env, "cpu_flags", lambda: set(ZEN4_FLAGS.split()))
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    portable = {**environ, "TRAINBOARD_LLAMA_CPU": "portable"}

    assert setup_env.machine_cmake_args(environ)[-4:] == list(setup_env.AVX512_OPTIONS)
    assert setup_env.machine_cmake_args(portable) == setup_env.LLAMA_CPP_CMAKE_ARGS
    assert setup_env.wheelhouse(portable) != setup_env.wheelhouse(environ)
    binding = setup_env.local_lm_binding({})
    # the install stamp changes with the CPU options too: switching reinstalls the binding
    assert setup_env.digest(binding, environ) != setup_env.digest(binding, portable)
    monkeypatch.setattr(setup_env, "cpu_flags", lambda: {"avx2"})
    # an AVX2-only machine sharing the cache never gets the AVX-512 wheel
    assert setup_env.wheelhouse(environ) == setup_env.wheelhouse(portable)
    assert setup_env.digest(binding, environ) == setup_env.digest(binding, portable)


def test_an_unknown_llama_cpu_is_refused_by_name_not_built_as_avx512():
    assert setup_env.llama_cpu({"TRAINBOARD_LLAMA_CPU": " Portable "}) == "portable"
    assert setup_env.llama_cpu({}) == "auto"
    with pytest.raises(ValueError, match="auto or portable, got 'portabel'"):
        setup_env.machine_cmake_args({"TRAINBOARD_LLAMA_CPU": "portabel"})


def test_wheelhouse_is_named_after_the_pin_and_the_build_flags(tmp_path, monkeypatch):
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    house = setup_env.wheelhouse(environ)
    assert house.parent == tmp_path
    assert setup_env.llama_cpp_pin().startswith("llama-cpp-python==")
    # the caller's own flags build (and keep) another wheel
    assert setup_env.wheelhouse({**environ, "CMAKE_ARGS": "-DGGML_CUDA=on"}) != house
    with monkeypatch.context() as patched:
        patched.setattr(setup_env, "LLAMA_CPP_CMAKE_ARGS", ["-DGGML_NATIVE=ON"])
        assert setup_env.wheelhouse(environ) != house
    with monkeypatch.context() as patched:
        patched.setattr(setup_env, "llama_cpp_pin", lambda: "llama-cpp-python==9.9.9")
        assert setup_env.wheelhouse(environ) != house
    assert setup_env.wheelhouse(environ) == house


def test_wheelhouse_is_the_same_for_every_clone(tmp_path, monkeypatch):
    """The flags name this clone's include file by path; the wheelhouse must not."""
    environ = {"TRAINBOARD_WHEELHOUSE": str(tmp_path)}
    house = setup_env.wheelhouse(environ)
    other = tmp_path / "elsewhere" / "llama_cpp_bindings_only.cmake"
    other.parent.mkdir()
    other.write_text(setup_env.BINDINGS_ONLY_CMAKE.read_text(encoding="utf-8"))
    flags = [
        f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={other}" if "INCLUDE=" in arg else arg
        for arg in setup_env.LLAMA_CPP_CMAKE_ARGS
    ]
    monkeypatch.setattr(setup_env, "LLAMA_CPP_CMAKE_ARGS", flags)
    monkeypatch.setattr(setup_env, "BINDINGS_ONLY_CMAKE", other)
    assert setup_env.wheelhouse(environ) == house


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
    sources = setup_env.parse_pip_config(PIP_CONFIG)

    assert sources == {
        "find-links": ["/opt/wheels", "/srv/more-wheels"],
        "index-url": ["https://mirror.example/simple"],  # the environment wins, as in pip
        "constraint": ["/etc/xdg/pip/constraints.txt"],
        "cert": ["/etc/ssl/certs/ca-certificates.crt"],
        "extra-index-url": ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"],
    }
    args = setup_env.uv_source_args(sources)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    assert args[2:] == [
        "--index-url", "https://mirror.example/simple",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--find-links", "/srv/more-wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
    ]  # fmt: skip
    assert setup_env.uv_environment({}, sources)["SSL_CERT_FILE"] == sources["cert"][0]


def test_no_pip_configuration_means_pypi_alone():
    assert setup_env.parse_pip_config("") == {}
    assert setup_env.uv_source_args({}) == ["--index-strategy", "unsafe-best-match"]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A project folder of its own for the requirements files the binding is read from."""
    monkeypatch.setattr(setup_env, "BASE_DIR", tmp_path)
    return tmp_path


def test_llama_cpp_python_in_the_requirements_is_built_from_source(tree):
    (tree / "requirements-local.txt").write_text("torch==2.13.0\nllama-cpp-python==0.3.36\n")

    binding = setup_env.local_lm_binding({})

    assert binding == setup_env.Binding("source", "llama-cpp-python==0.3.36", None)
    assert setup_env.other_binding(binding) is None
    assert setup_env.requirement_files(binding, tree / "scratch")[1] == (
        tree / "requirements-local.txt"
    )


def test_a_prebuilt_binding_installs_as_named_and_source_build_swaps_it_out(tree):
    """Switching the binding is one line of requirements-local.txt;
    TRAINBOARD_LOCAL_LM_BUILD=source builds requirements-local-source.txt's pin instead."""
    line = "llama-cpp-prebuilt==1.0  # local-lm-binding"
    (tree / "requirements-local.txt").write_text(f"torch==2.13.0\n{line}\nnumpy==2.4.6\n")
    (tree / "requirements-local-source.txt").write_text("llama-cpp-python==0.3.36\n")

    prebuilt = setup_env.local_lm_binding({})
    source = setup_env.local_lm_binding({"TRAINBOARD_LOCAL_LM_BUILD": "source"})

    assert prebuilt == setup_env.Binding("prebuilt", None, line)
    assert source == setup_env.Binding("source", "llama-cpp-python==0.3.36", line)
    assert setup_env.llama_cpp_pin() == "llama-cpp-python==0.3.36"
    scratch = tree / "scratch"
    scratch.mkdir()
    assert setup_env.requirement_files(prebuilt, scratch)[1] == tree / "requirements-local.txt"
    trimmed = setup_env.requirement_files(source, scratch)[1]
    assert trimmed.read_text() == "torch==2.13.0\nnumpy==2.4.6\n"
    (tree / "requirements.txt").write_text("")
    (tree / "requirements-dev.txt").write_text("")
    assert setup_env.digest(prebuilt, {}) != setup_env.digest(source, {})  # a switch reinstalls
    # and uninstalls the binding not chosen (both install the llama_cpp module)
    assert setup_env.other_binding(prebuilt) == "llama-cpp-python"
    assert setup_env.other_binding(source) == "llama-cpp-prebuilt"


def test_a_source_build_without_a_pin_or_a_bad_choice_says_what_is_missing(tree):
    (tree / "requirements-local.txt").write_text("llama-cpp-prebuilt==1.0  # local-lm-binding\n")

    with pytest.raises(SystemExit, match="requirements-local-source.txt"):
        setup_env.local_lm_binding({"TRAINBOARD_LOCAL_LM_BUILD": "source"})
    with pytest.raises(SystemExit, match="TRAINBOARD_LOCAL_LM_BUILD must be one of"):
        setup_env.local_lm_binding({"TRAINBOARD_LOCAL_LM_BUILD": "compile"})


def test_bytecode_is_compiled_at_install_only_where_python_cannot_cache_it():
    assert setup_env.compile_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}) is True
    assert setup_env.compile_bytecode({}) is False


def test_what_installs_while_the_binding_compiles_leaves_only_the_binding_out(tree):
    (tree / "requirements-local.txt").write_text(
        "torch==2.13.0\nllama-cpp-python==0.3.36\nsentence-transformers==6.2.0\n"
    )
    scratch = tree / "scratch"
    scratch.mkdir()
    binding = setup_env.local_lm_binding({})

    others = setup_env.requirement_files(binding, scratch, without_binding=True)[1]

    assert others.read_text() == "torch==2.13.0\nsentence-transformers==6.2.0\n"
    assert setup_env.requirement_files(binding, scratch)[1] == tree / "requirements-local.txt"


def test_the_binding_compiles_while_the_other_packages_install(monkeypatch):
    """The block (the other packages' install) runs while the compile has not finished: the
    compile waits for a signal only the block gives, so run one after the other they would
    never end."""
    block_ran = threading.Event()
    compiled = []

    def compile_after_the_block_started(env, progress):
        assert block_ran.wait(10), "the compile ran before the install, not beside it"
        compiled.append(True)

    monkeypatch.setattr(setup_env, "source_wheel", compile_after_the_block_started)
    with setup_env.compiling_meanwhile({}, setup_env.Progress()):
        block_ran.set()
    assert compiled == [True]  # and the block's end waited for it


def test_a_failed_compile_fails_the_set_up_after_the_install(monkeypatch):
    def failing_compile(env, progress):
        raise subprocess.CalledProcessError(1, ["pip", "wheel"])

    monkeypatch.setattr(setup_env, "source_wheel", failing_compile)
    with pytest.raises(subprocess.CalledProcessError):
        with setup_env.compiling_meanwhile({}, setup_env.Progress()):
            pass


def test_setup_converts_the_local_weights_and_only_warns_when_it_cannot(monkeypatch, capfd):
    assert setup_env.CONVERT_WEIGHTS == ["-m", "training.engine.local.prepare_weights"]
    python = Path(sys.executable)
    monkeypatch.setattr(setup_env, "CONVERT_WEIGHTS", ["-c", "import sys; sys.exit(0)"])
    assert setup_env.convert_weights(python, {}) is True
    printed = capfd.readouterr().out
    assert "setup: phase convert the local model's weights:" in printed
    assert "warning" not in printed
    monkeypatch.setattr(setup_env, "CONVERT_WEIGHTS", ["-c", "import sys; sys.exit(1)"])
    assert setup_env.convert_weights(python, {}) is False  # no exception: setup goes on
    assert "setup: warning: the local model's weights were not converted" in capfd.readouterr().out
