"""Model strings → engine LanguageModel and EmbeddingModel objects.

A model string is ``provider/name``: ``local/…`` (the engine's offline provider) or any
litellm provider. ``register_provider`` lets a process resolve one more prefix itself
instead of through litellm; Trainboard registers none (the test settings register the
scripted ``fake/`` models of tests/support/fake_models.py).

Every way a model is built passes the endpoint rules (:mod:`training.programs.endpoints`):
a form's model (``make_language_model``) and every model found in a stored or uploaded
program document (``check_model_config``, called by the document walk the worker's load and
the import share), so an imported program cannot send requests where this server does not
allow them, nor carry a test fake into production.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import training.engine as synalinks
from training.engine.language_models.litellm_loader import get_litellm
from training.engine.language_models.redaction import is_secret_name
from training.engine.saving import get_registered_object
from training.programs import endpoints


class ModelStringError(ValueError):
    """A model string the dashboard cannot turn into a language model."""


@dataclass(frozen=True)
class ModelProvider:
    """A provider prefix resolved by the dashboard itself instead of through litellm.

    Args:
        language_model: ``(model, temperature=, api_base=, max_tokens=)`` → a language model;
            raises ModelStringError for a model string it does not know.
        embedding_model: ``(model)`` → an embedding model.
        address: where its models are reached, for error messages.

    Example:
        >>> register_provider("fake", ModelProvider(make_fake, FakeEmbeddingModel, "a script"))
    """

    language_model: Callable[..., Any]
    embedding_model: Callable[[str], Any]
    address: str


_PROVIDERS: dict[str, ModelProvider] = {}


def register_provider(prefix: str, provider: ModelProvider) -> None:
    """Resolve ``<prefix>/…`` model strings with ``provider`` in this process."""
    _PROVIDERS[prefix] = provider


def _registered(model: str) -> ModelProvider | None:
    return _PROVIDERS.get(model.split("/", 1)[0]) if "/" in model else None


def check_provider(model: str, kind: str = "model") -> None:
    """ModelStringError unless litellm knows the provider of ``provider/name``.

    Offline and instant (litellm's own provider table), so a typo such as ``nosuch/model``
    is reported on the form that took it instead of failing every LM call of a run.
    ``local/`` (checked by the engine with its own hint) and registered prefixes are ours.
    """
    provider = model.split("/", 1)[0]
    if provider == "local" or provider in _PROVIDERS:
        return
    litellm = get_litellm()
    known = {str(getattr(item, "value", item)) for item in litellm.provider_list}
    known |= {str(item.get("provider")) for item in litellm.custom_provider_map or []}
    if provider not in known:
        raise ModelStringError(
            f"{kind} {model!r}: unknown provider {provider!r}. Use local/smollm2 (offline) or "
            "a litellm provider such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
            "ollama/llama3, hosted_vllm/<model> (with an API base)"
        )


def allow_private_endpoints() -> bool:
    """``TRAINBOARD_ALLOW_PRIVATE_ENDPOINTS``: saved endpoints may be loopback/private."""
    from training import conf

    return conf.flag(endpoints.SETTING)


def check_endpoint(api_base: str | None, model: str = "", saved: bool = False) -> None:
    """ModelStringError unless requests may be sent to ``api_base`` (see ``endpoints``):
    ``saved`` for a saved endpoint's URL, False for an API base typed on a program. With no
    ``api_base``, the address the model's provider would use instead passes the raw API
    base's rule (``endpoints.check_default_base``)."""
    try:
        if (api_base or "").strip():
            endpoints.check_api_base(api_base, saved=saved, allow_private=allow_private_endpoints())
            endpoints.check_provider(model, api_base)
        elif _registered(model) is None:
            endpoints.check_default_base(model, allow_private=allow_private_endpoints())
    except endpoints.EndpointRefused as exc:
        raise ModelStringError(str(exc)) from None


def may_reach_private(config: dict) -> bool:
    """Whether a model config's connections may go to loopback/private addresses: only a
    saved endpoint's, and only while the administrator allows it."""
    return bool(config.get("endpoint")) and allow_private_endpoints()


#: The engine classes a stored or uploaded document may name for each kind of model.
ENGINE_CLASSES = {
    "language_model": synalinks.LanguageModel,
    "embedding_model": synalinks.EmbeddingModel,
}


def check_model_config(class_name: str, config: dict, kind: str) -> None:
    """ModelStringError unless a model found in a program document may be built here.

    Its class must be the engine's own (a test fake or any other subclass only for a
    registered provider's model strings), its provider one litellm knows, and its
    ``api_base`` one the endpoint policy allows.
    """
    model = str(config.get("model") or "")
    if _registered(model) is None:
        try:
            cls = get_registered_object(str(class_name))
        except ValueError:
            cls = None
        if cls is not ENGINE_CLASSES[kind]:
            raise ModelStringError(
                f"{kind.replace('_', ' ')} {model!r}: class {class_name!r} is not allowed in a "
                f"program here (only {ENGINE_CLASSES[kind].__name__})"
            )
        check_provider(model, kind.replace("_", " "))
    check_endpoint(config.get("api_base"), model, saved=bool(config.get("endpoint")))


def missing_keys(model: str, api_base: str | None = None) -> list[str]:
    """The provider key variables ``model`` needs that the server's environment lacks.

    Empty when the model names its own ``api_base`` (its endpoint decides), for ``local/`` and
    registered providers, and for providers litellm knows no key for. Only secret variables
    count (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``…): an unset ``OLLAMA_API_BASE`` has
    a default.
    """
    model = (model or "").strip()
    if (api_base or "").strip() or "/" not in model:
        return []
    if model.split("/", 1)[0] == "local" or _registered(model) is not None:
        return []
    try:
        report = get_litellm().validate_environment(model=model)
    except Exception:  # a provider litellm cannot inspect: the run's first call will tell
        return []
    if report.get("keys_in_environment"):
        return []
    return [name for name in report.get("missing_keys") or [] if is_secret_name(name)]


def make_language_model(
    model: str,
    temperature: float = 0.0,
    api_base: str = "",
    max_tokens: int | None = None,
    endpoint: str = "",
    structured_output: str = "auto",
) -> Any:
    """The engine LM for a model string (``provider/name``), at ``api_base`` (``endpoint``:
    the saved endpoint's name it came from; its key is added only where the model is called,
    by ``saved_endpoints.connect``)."""
    model = (model or "").strip()
    if not model:
        raise ModelStringError("a model string is required, e.g. local/smollm2")
    check_endpoint(api_base, model, saved=bool(endpoint))
    provider = _registered(model)
    if provider is not None:
        return provider.language_model(
            model, temperature=temperature, api_base=api_base, max_tokens=max_tokens
        )
    if "/" not in model:
        raise ModelStringError(
            f"model {model!r} must look like provider/name (e.g. local/smollm2, openai/gpt-4o-mini)"
        )
    check_provider(model)
    return synalinks.LanguageModel(
        model=model,
        temperature=temperature,
        api_base=api_base or None,
        max_tokens=max_tokens or None,
        endpoint=endpoint or None,
        allow_private_addresses=may_reach_private({"endpoint": endpoint}),
        structured_output=structured_output,
    )


def make_embedding_model(model: str) -> Any:
    """The engine embedding model for a model string (``provider/name``)."""
    model = (model or "").strip()
    if "/" not in model:
        raise ModelStringError(
            f"embedding model {model!r} must look like provider/name "
            "(e.g. local/minilm, openai/text-embedding-3-small)"
        )
    provider = _registered(model)
    if provider is not None:
        return provider.embedding_model(model)
    check_provider(model, "embedding model")
    check_endpoint("", model)
    return synalinks.EmbeddingModel(model=model)


def describe_address(language_model: Any) -> str:
    """Where a model is reached, for error messages ("the local process", an api_base...)."""
    model = getattr(language_model, "model", "?")
    api_base = getattr(language_model, "api_base", None)
    if api_base:
        return api_base
    if model.startswith("local/"):
        return "the local llama-cpp provider in the worker"
    provider = _registered(model)
    if provider is not None:
        return provider.address
    provider = model.split("/", 1)[0]
    return f"the default {provider} endpoint (set an API base to change it)"
