"""Run configuration: validate what the launch form sent, and build the engine objects.

``validate_run_config(data, program_fields, target_fields)`` takes a flat dict (the form's
cleaned data or a test's literal) and returns the JSON configuration a Run stores, or raises
:class:`RunConfigError` whose ``errors`` maps each bad field to a message saying what is
wrong and what is allowed. The same builders the worker uses (``build_reward``,
``build_metrics``, ``build_optimizer``) are called during validation, so an optimizer
parameter the engine refuses is reported on the form, not as a failed run.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings

import training.engine as synalinks
from training.engine.optimizers import omega as omega_module
from training.services.lm import (
    ModelStringError,
    check_provider,
    make_embedding_model,
    make_language_model,
)

REWARDS = ("ExactMatch", "CosineSimilarity", "LMAsJudge")
METRICS = ("F1Score", "Precision", "Recall")
OPTIMIZERS = ("RandomFewShot", "OMEGA")
OMEGA_ALGORITHMS = omega_module.ALGORITHMS
# The engine's selection choices (omega_module.SELECTIONS) in the order the form lists them:
# the guide's default first.
OMEGA_SELECTIONS = ("softmax", "best", "random")

# Defaults of every parameter, as the training guide documents them.
RANDOM_FEW_SHOT_DEFAULTS = {
    "few_shot_learning": False,
    "nb_min_examples": 1,
    "nb_max_examples": 3,
    "nb_candidates": 1,
}
OMEGA_DEFAULTS = {
    "language_model": "",  # empty: the program's model
    "embedding_model": "",  # empty: settings.TRAINBOARD_EMBEDDING_MODEL
    "k_nearest_fitter": 5,
    "mutation_temperature": 0.3,
    "crossover_temperature": 0.3,
    "selection_temperature": 0.3,
    "sampling_temperature": 0.3,
    "few_shot_learning": False,
    "nb_min_examples": 1,
    "nb_max_examples": 3,
    "merging_rate": 0.02,
    "population_size": 10,
    "algorithm": "dns",
    "selection": "softmax",
    "instructions": "",
}
LIMITS = {"epochs": (1, 1000), "batch_size": (1, 4096), "evaluations": (0, 20)}


class RunConfigError(ValueError):
    """Invalid run configuration; ``errors`` maps field names to messages."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))


def _mask(value: Any, field: str, allowed: list[str], errors: dict[str, str]) -> list[str] | None:
    if value in (None, "", []):
        return None
    names = [part.strip() for part in value.split(",")] if isinstance(value, str) else list(value)
    names = [name for name in names if name]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        errors[field] = f"unknown field(s) {unknown}; the program's output fields are {allowed}"
    return names or None


def _int(
    data: dict, key: str, default: int, low: int, high: int, errors: dict, field: str | None = None
) -> int:
    field = field or key
    value = data.get(key, default)
    if value in (None, ""):
        value = default
    try:
        number = int(value)
        if str(value).strip() != str(number) and not isinstance(value, int):
            raise ValueError
    except (TypeError, ValueError):
        errors[field] = f"must be a whole number between {low} and {high}, got {value!r}"
        return default
    if not low <= number <= high:
        errors[field] = f"must be between {low} and {high}, got {number}"
    return number


def _float(data: dict, key: str, default: float, errors: dict, field: str | None = None) -> float:
    field = field or key
    value = data.get(key, default)
    if value in (None, ""):
        value = default
    try:
        return float(value)
    except (TypeError, ValueError):
        errors[field] = f"must be a number, got {value!r}"
        return default


def _check_model(value: Any, field: str, kind: str, errors: dict) -> None:
    """Report a mistyped model string (no provider/, unknown provider) on its own field.

    The builders below would refuse it too, but only once every other field is valid and
    under the optimizer's or reward's name; here the message lands where the typo is.
    """
    model = str(value or "").strip()
    if not model:
        return
    if "/" not in model:
        errors[field] = f"{kind} {model!r} must look like provider/name (e.g. local/smollm2)"
        return
    try:
        check_provider(model, kind)
    except ModelStringError as exc:
        errors[field] = str(exc)


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "on", "yes")
    return bool(value)


def validate_run_config(
    data: dict[str, Any], output_fields: list[str], target_fields: list[str], program_model: str
) -> dict[str, Any]:
    """Validated run configuration (JSON) from a flat dict; RunConfigError otherwise."""
    errors: dict[str, str] = {}
    config: dict[str, Any] = {"model": program_model}

    # Reward
    reward_name = data.get("reward") or "ExactMatch"
    if reward_name not in REWARDS:
        errors["reward"] = f"must be one of {', '.join(REWARDS)}, got {reward_name!r}"
    reward: dict[str, Any] = {"name": reward_name}
    in_mask = _mask(data.get("reward_in_mask"), "reward_in_mask", output_fields, errors)
    out_mask = _mask(data.get("reward_out_mask"), "reward_out_mask", output_fields, errors)
    if in_mask is None and out_mask is None:
        in_mask = list(target_fields)  # compare what the dataset knows, not e.g. `thinking`
    reward["in_mask"], reward["out_mask"] = in_mask, out_mask
    if reward_name == "CosineSimilarity":
        reward["embedding_model"] = (data.get("reward_embedding_model") or "").strip() or (
            settings.TRAINBOARD_EMBEDDING_MODEL
        )
    if reward_name == "LMAsJudge":
        reward["language_model"] = (
            data.get("reward_language_model") or ""
        ).strip() or program_model
        reward["criteria"] = (
            data.get("reward_criteria") or ""
        ).strip() or "accuracy and completeness"
    config["reward"] = reward
    if reward_name == "CosineSimilarity":
        _check_model(
            data.get("reward_embedding_model"), "reward_embedding_model", "embedding model", errors
        )
    if reward_name == "LMAsJudge":
        _check_model(
            data.get("reward_language_model"), "reward_language_model", "judge model", errors
        )

    # Metrics
    metric_names = data.get("metrics") or []
    if isinstance(metric_names, str):
        metric_names = [name.strip() for name in metric_names.split(",") if name.strip()]
    bad = [name for name in metric_names if name not in METRICS]
    if bad:
        errors["metrics"] = f"unknown metric(s) {bad}; choose among {', '.join(METRICS)}"
    metrics_mask = _mask(data.get("metrics_in_mask"), "metrics_in_mask", output_fields, errors)
    config["metrics"] = [
        {"name": name, "in_mask": metrics_mask or list(target_fields)}
        for name in metric_names
        if name in METRICS
    ]

    # Training loop
    config["epochs"] = _int(data, "epochs", 3, *LIMITS["epochs"], errors)
    config["batch_size"] = _int(data, "batch_size", 8, *LIMITS["batch_size"], errors)
    split = _float(data, "validation_split", 0.0, errors)
    if not 0.0 <= split < 1.0:
        errors["validation_split"] = (
            f"must be at least 0 and below 1 (a fraction of the training split), got {split}"
        )
    config["validation_split"] = split
    config["shuffle"] = _bool(data.get("shuffle", True))
    seed = data.get("seed")
    if seed in (None, ""):
        seed = secrets.randbelow(2**31)  # stored, so a resume replays the same order
    config["seed"] = _int({"seed": seed}, "seed", 0, 0, 2**31 - 1, errors)
    config["evaluations_before"] = _int(
        data, "evaluations_before", 1, *LIMITS["evaluations"], errors
    )
    config["evaluations_after"] = _int(data, "evaluations_after", 1, *LIMITS["evaluations"], errors)

    # Optimizer
    name = data.get("optimizer") or "RandomFewShot"
    if name not in OPTIMIZERS:
        errors["optimizer"] = f"must be one of {', '.join(OPTIMIZERS)}, got {name!r}"
        name = "RandomFewShot"
    config["optimizer"] = {"name": name, "params": _optimizer_params(name, data, errors)}
    if name == "OMEGA":
        _check_model(
            data.get("omega_language_model"), "omega_language_model", "language_model", errors
        )
        _check_model(
            data.get("omega_embedding_model"), "omega_embedding_model", "embedding_model", errors
        )

    if not errors:
        # The engine's own constructors have the last word (e.g. OMEGA's pitfalls).
        for field, build in (
            ("reward", lambda: build_reward(config)),
            ("metrics", lambda: build_metrics(config)),
            ("optimizer", lambda: build_optimizer(config)),
        ):
            try:
                build()
            except (ValueError, TypeError, RuntimeError) as exc:
                # RuntimeError: a local model that cannot run here, a rejected model string.
                errors[field] = str(exc)
    if errors:
        raise RunConfigError(errors)
    return config


def _optimizer_params(name: str, data: dict, errors: dict) -> dict[str, Any]:
    prefix = "rfs_" if name == "RandomFewShot" else "omega_"
    defaults = RANDOM_FEW_SHOT_DEFAULTS if name == "RandomFewShot" else OMEGA_DEFAULTS
    params: dict[str, Any] = {}
    for key, default in defaults.items():
        field = prefix + key
        if isinstance(default, bool):
            params[key] = _bool(data.get(field, default))
        elif isinstance(default, int):
            params[key] = _int(data, field, default, 0, 10_000, errors)
        elif isinstance(default, float):
            params[key] = _float(data, field, default, errors)
        else:
            params[key] = str(data.get(field) or default).strip()
    lo, hi = params["nb_min_examples"], params["nb_max_examples"]
    if lo > hi:
        errors[prefix + "nb_max_examples"] = f"must be at least nb_min_examples ({lo}), got {hi}"
    if name == "RandomFewShot":
        if params["nb_candidates"] < 1:
            errors["rfs_nb_candidates"] = "must be at least 1"
        return params
    for key in omega_module.TEMPERATURES:
        if params[key] <= 0:
            errors["omega_" + key] = (
                f"must be greater than 0 (the guide's default is 0.3), got {params[key]}"
            )
    if not 0.0 <= params["merging_rate"] <= 1.0:
        errors["omega_merging_rate"] = f"must be between 0 and 1, got {params['merging_rate']}"
    if params["population_size"] < 2:
        errors["omega_population_size"] = f"must be at least 2, got {params['population_size']}"
    if params["k_nearest_fitter"] < 1:
        errors["omega_k_nearest_fitter"] = f"must be at least 1, got {params['k_nearest_fitter']}"
    if params["algorithm"] not in OMEGA_ALGORITHMS:
        errors["omega_algorithm"] = (
            f"must be one of {', '.join(OMEGA_ALGORITHMS)}, got {params['algorithm']!r}"
        )
    if params["selection"] not in OMEGA_SELECTIONS:
        errors["omega_selection"] = (
            f"must be one of {', '.join(OMEGA_SELECTIONS)}, got {params['selection']!r}"
        )
    return params


# --- builders (used by validation and by the worker) -----------------------------------------


def build_reward(config: dict[str, Any]) -> Any:
    spec = config["reward"]
    masks = {"in_mask": spec.get("in_mask"), "out_mask": spec.get("out_mask")}
    if spec["name"] == "ExactMatch":
        return synalinks.rewards.ExactMatch(**masks)
    if spec["name"] == "CosineSimilarity":
        return synalinks.rewards.CosineSimilarity(
            embedding_model=make_embedding_model(spec["embedding_model"]), **masks
        )
    if spec["name"] == "LMAsJudge":
        return synalinks.rewards.LMAsJudge(
            language_model=make_language_model(spec["language_model"]),
            criteria=spec["criteria"],
            **masks,
        )
    raise ValueError(f"unknown reward {spec['name']!r}")


def build_metrics(config: dict[str, Any]) -> list[Any]:
    classes = {name: getattr(synalinks.metrics, name) for name in METRICS}
    return [
        classes[spec["name"]](in_mask=spec.get("in_mask")) for spec in config.get("metrics", [])
    ]


def build_optimizer(config: dict[str, Any]) -> Any:
    spec = config["optimizer"]
    params = dict(spec["params"])
    if spec["name"] == "RandomFewShot":
        return synalinks.optimizers.RandomFewShot(seed=config.get("seed"), **params)
    params["language_model"] = make_language_model(params["language_model"] or config["model"])
    embedding = params["embedding_model"]
    if not embedding and params.get("algorithm") != "ga":  # GA has no competition to embed for
        embedding = settings.TRAINBOARD_EMBEDDING_MODEL
    params["embedding_model"] = make_embedding_model(embedding) if embedding else None
    params["instructions"] = params["instructions"] or None
    return synalinks.optimizers.OMEGA(seed=config.get("seed"), **params)
