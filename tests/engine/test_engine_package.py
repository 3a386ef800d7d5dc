"""The engine as a package (pyproject.toml): its wheel holds the engine and the offline models
beside it (found through their entry point), none of the dashboard, and, installed into a
fresh virtual environment, runs a program from outside the clone.

The wheel is built from a copy of the working tree (an in-tree setuptools build would leave
``build/`` and ``*.egg-info`` in the shared checkout), with the project venv's setuptools and
no build isolation: no network. The venv it is installed into gets the wheel with
``--no-deps`` and reuses the project venv's packages through a ``.pth`` file (the
``--system-site-packages`` idea, pointed at .venv), so nothing is downloaded or compiled.
The README's "Use the engine from Python" snippet runs there too, on an exported program.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Left out of the copy the wheel is built from (never read by the build, or its own output).
SKIPPED_AT_ROOT = {".git", ".venv", "venv", "node_modules", "var", "build", "dist"}
SKIPPED_ANYWHERE = ("__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info", "*.pyc")
#: The dashboard: none of it may ship.
DASHBOARD_PREFIXES = (
    "datasets/",
    "core/",
    "project/",
    "tests/",
    "bench/",
    "scripts/",
    "templates/",
)


def _ignore(directory: str, names: list[str]) -> set[str]:
    skipped = set(shutil.ignore_patterns(*SKIPPED_ANYWHERE)(directory, names))
    if Path(directory) == ROOT:
        skipped |= SKIPPED_AT_ROOT & set(names)
    return skipped


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The engine's wheel, built from a copy of the working tree."""
    source = tmp_path_factory.mktemp("source") / "trainboard"
    shutil.copytree(ROOT, source, ignore=_ignore, symlinks=True)
    out = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--quiet", "-w", str(out), str(source)]
    )
    (built,) = out.glob("trainboard_engine-*.whl")
    return built


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_the_engine_and_none_of_the_dashboard(wheel):
    names = _names(wheel)
    shipped = {name for name in names if name.endswith(".py")}
    engine = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "training" / "engine").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert engine <= shipped, f"missing from the wheel: {sorted(engine - shipped)[:10]}"
    local = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "trainboard_local").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert local <= shipped, f"offline models missing: {sorted(local - shipped)[:10]}"
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        declared = archive.read(entry_points).decode()
    assert "[trainboard_engine.offline]" in declared and "local = trainboard_local" in declared
    assert "training/engine/datasets/data/gsm8k/train.jsonl" in names  # package data
    assert "training/engine/datasets/data/gsm8k/LICENSE" in names
    # `training` stays a namespace package: no training/__init__.py, no app module
    outside = [name for name in names if not name.startswith(("training/engine/", "trainboard"))]
    assert outside == [], f"not the engine: {outside}"
    assert not any(name.startswith(DASHBOARD_PREFIXES) for name in names)
    assert not any(re.match(r"training/(models|views|programs|runs|migrations)", n) for n in names)


def test_the_wheel_needs_no_django_and_offers_the_local_extra(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(meta).decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M)
    base = [line for line in requires if "extra ==" not in line]
    names = {re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower() for line in base}
    assert {"numpy", "pydantic", "litellm", "jsonschema"} <= names
    assert not names & {"django", "channels", "celery", "llama-cpp-python", "torch"}
    assert "Provides-Extra: local" in metadata
    local = [line for line in requires if 'extra == "local"' in line]
    assert any(line.startswith("llama-cpp-python") for line in local)
    assert any(line.startswith("sentence-transformers") for line in local)


#: Run by the venv's Python from a temporary folder: the engine must come from the wheel.
PROGRAM_SCRIPT = """
import asyncio, json, sys
import training.engine as synalinks
from training.engine.data_model import create_data_model

Ticket = create_data_model("Ticket", [{"name": "text", "type": "str"}])
Triage = create_data_model(
    "Triage", [{"name": "team", "type": "str", "choices": ["billing", "bug", "other"]}]
)

async def main():
    lm = synalinks.testing.FakeLanguageModel(
        responses={"My card was charged twice": {"team": "billing"}}
    )
    inputs = synalinks.Input(data_model=Ticket)
    outputs = await synalinks.Generator(data_model=Triage, language_model=lm)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="triage")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]))
    y = await program.predict([Ticket(text="My card was charged twice")])
    program.save("program-7.json")
    again = await synalinks.Program.load("program-7.json").predict(
        [{"text": "My card was charged twice"}]
    )
    from training.engine.language_models import offline
    print(json.dumps({
        "engine": synalinks.__file__,
        "offline": offline.load().__file__,
        "django": "django" in sys.modules,
        "predicted": [p.get_json() for p in y],
        "loaded": [p.get_json() for p in again],
    }))

asyncio.run(main())
"""


def _readme_snippet() -> str:
    """The Python block of the README's "Use the engine from Python" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use the engine from Python", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding the wheel (no dependencies: the project venv's, via a .pth)."""
    home = tmp_path_factory.mktemp("venv") / "enginevenv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(home)])
    python = home / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
        + ["--no-index", "--quiet", str(wheel)]
    )
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    project = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib.stdout.strip(), "project-venv.pth").write_text("\n".join(sorted(project)) + "\n")
    return home


def _python_outside(venv: Path, script: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    return _run([str(venv / "bin" / "python"), "-c", script], cwd=cwd, env=env).stdout


def test_the_installed_engine_runs_a_program_outside_the_clone(venv, tmp_path):
    out = _python_outside(venv, textwrap.dedent(PROGRAM_SCRIPT), tmp_path)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["engine"].startswith(str(venv)), result["engine"]
    # the offline models, found through the wheel's entry point (nothing registers them here)
    assert result["offline"].startswith(str(venv)), result["offline"]
    assert "trainboard_local" in result["offline"]
    assert not result["django"]
    assert result["predicted"] == result["loaded"] == [{"team": "billing"}]

    # the README's snippet, on the program just saved ("Export JSON" writes the same file)
    printed = _python_outside(venv, _readme_snippet(), tmp_path)
    assert "Ticket" in printed and "Triage" in printed
    assert "'billing', 'bug', 'other'" in printed
    assert "{'team': 'billing'}" in printed
