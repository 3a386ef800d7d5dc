"""Run configuration: validate what the launch form sent, and build the engine objects.

``validate_run_config(data, program_fields, target_fields)`` takes a flat dict (the form's
cleaned data or a test's literal) and returns the JSON configuration a Run stores, or raises
:class:`RunConfigError` whose ``errors`` maps each bad field to a message saying what is
wrong and what is allowed.

No limit is written here. The optimizers' parameters are checked by their own constructors
against the bounds they declare (``OMEGA.PARAMETERS``, ...), fit's arguments against
``training.engine.bounds``; their defaults are read from the engine's signatures. What this
module adds is the dashboard's own policy: caps on a run's size (``EPOCHS``, ``BATCH_SIZE``)
and its evaluation passes. The launch form builds its typed fields from the same objects
(:data:`TRAINING`, :func:`optimizer_parameters`), so the browser, the form and the engine
enforce one rule.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings

import training.engine as synalinks
from training import optimizer_registry
from training.engine import bounds
from training.execution import budget
from training.models import run_json
from training.programs.lm import (
    ModelStringError,
    check_provider,
    make_embedding_model,
    make_language_model,
)

REWARDS = ("ExactMatch", "CosineSimilarity", "LMAsJudge")
METRICS = ("F1Score", "Precision", "Recall")
#: Constructor parameters a run does not take from the user: the run's own seed is passed,
#: the name is the class's, and a distance function is code.
NOT_OFFERED = ("seed", "name", "distance_function")

# The dashboard's policy on top of the engine's rules: a run's size is capped (the engine's
# own bounds have no ceiling), and each run evaluates the test split a few times.
TRAINING = {
    "epochs": bounds.EPOCHS.narrow(1000),
    "batch_size": bounds.BATCH_SIZE.narrow(4096),
    "validation_split": bounds.VALIDATION_SPLIT,
    "selection_split": bounds.SELECTION_SPLIT,
    "seed": bounds.IntRange(
        0, 2**31 - 1, help="Fixes the shuffle and the optimizer's draws; empty picks one."
    ),
    "evaluations_before": bounds.IntRange(
        0, 20, help="Passes over the test split before training (more show the spread)."
    ),
    "evaluations_after": bounds.IntRange(
        0, 20, help="Passes over the test split after training, with the trained program."
    ),
}
#: Help of the training fields that have no bound.
TRAINING_HELP = {"shuffle": "Shuffle the training rows each epoch (from the seed)."}
#: Defaults of the training fields: fit's own for its arguments; one evaluation pass each
#: side; no seed (a random one is drawn and stored, so a resume replays the same order).
# The dashboard's suggested training settings, defined here once (the form shows them, a
# stored configuration without them gets them). They differ from fit()'s own signature on
# purpose: a first run from the browser should train for a few small batches and keep a
# validation split for the optimizer to select on, which fit's script defaults do not.
TRAINING_DEFAULTS = {
    "epochs": 3,
    "batch_size": 8,
    "validation_split": 0.2,
    "selection_split": bounds.defaults(synalinks.Program.fit)["selection_split"],
    "shuffle": bounds.defaults(synalinks.Program.fit)["shuffle"],
    "seed": None,
    "evaluations_before": 1,
    "evaluations_after": 1,
}


#: How a run's training rows reached ``fit`` (its config's ``training_order``): ``launch``
#: spreads them by label where the dataset has a label set
#: (``datasets.services.training_rows``); a run from code was fit on the rows in the order its
#: code gave them. A run's pages must find its rows in the order its fit saw them.
TRAINING_ORDER = ("training_order", "spread_by_label")
#: The other value of ``training_order``: the rows in the order they were stored.
FILE_ORDER = run_json.FILE_ORDER


def spreads_by_label(config: dict[str, Any]) -> bool:
    """Whether the run with this config had its training rows spread by label."""
    key, value = TRAINING_ORDER
    return (config or {}).get(key) == value


def presets(label_task: bool) -> dict[str, dict[str, Any]]:
    """The launch form's presets for a program (``label_task``: it answers a label set):
    values for its fields (a preset leaves the others as they are), each named by what it
    launches. Both train with the optimizer the registry recommends for such a program; the
    quick one for as many epochs as that optimizer needs (its card's, else one). Each value is
    within its field's bound (tests/training/runs/test_launch_form_help.py checks)."""
    name = optimizer_registry.recommended(label_task)
    card = optimizer_registry.card(name)
    quick_epochs = card.epochs or 1
    thorough_epochs = card.epochs or 5
    shared = {"optimizer": name, "batch_size": 8}
    return {
        "quick": {
            "label": f"Quick try: {name}, {quick_epochs} epoch{'s' if quick_epochs > 1 else ''}",
            "help": (
                f"{name}, {quick_epochs} epoch{'s' if quick_epochs > 1 else ''}, one test "
                "evaluation each side: a first look (the forecast says how long)."
            ),
            "values": {
                **shared,
                "epochs": quick_epochs,
                "validation_split": 0.2,
                "evaluations_before": 1,
                "evaluations_after": 1,
            },
        },
        "thorough": {
            "label": (
                f"Thorough: {name}, {thorough_epochs} epoch{'s' if thorough_epochs > 1 else ''}, "
                "2 evaluations each side"
            ),
            "help": (
                "More epochs (where they add candidates), a larger validation split and repeated "
                "evaluations: slower, steadier figures."
            ),
            "values": {
                **shared,
                "epochs": thorough_epochs,
                "validation_split": 0.25,
                "evaluations_before": 2,
                "evaluations_after": 2,
            },
        },
    }


def optimizer_parameters(name: str) -> dict[str, tuple[Any, Any]]:
    """``{parameter: (default, bound or None)}`` of the parameters a run offers for ``name``,
    in the constructor's order; the defaults are the signature's unless the optimizer's card
    says otherwise (``Card.defaults``; None as "" for strings: the JSON a Run
    stores keeps "" for "the program's model" / "no instructions"). The launch form's initial
    values and a configuration's missing parameters both come from here."""
    cls = optimizer_registry.get(name)
    fixed = getattr(cls, "FIXED", {})
    overrides = cls.CARD.defaults
    result = {}
    for key, default in bounds.defaults(cls).items():
        if key in NOT_OFFERED:
            continue
        bound = cls.PARAMETERS.get(key)
        if isinstance(bound, bounds.Flag):
            bound = None  # described, not limited
        default = overrides.get(key, default)
        result[key] = (fixed.get(key, "" if default is None else default), bound)
    return result


def optimizer_help(name: str, key: str) -> str:
    """The one-line help the optimizer declares next to ``key``'s bound (``PARAMETERS``)."""
    return bounds.help_text(optimizer_registry.get(name).PARAMETERS, key)


def optimizer_fixed(name: str) -> dict[str, Any]:
    """Parameters whose value does not change what optimizer ``name`` does (shown fixed)."""
    return dict(getattr(optimizer_registry.get(name), "FIXED", {}))


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


def _value(data: dict, key: str, default: Any) -> Any:
    value = data.get(key, default)
    return default if value is None or value == "" else value


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
        _check_model(
            data.get("reward_embedding_model"), "reward_embedding_model", "embedding model", errors
        )
    if reward_name == "LMAsJudge":
        reward["language_model"] = (
            data.get("reward_language_model") or ""
        ).strip() or program_model
        reward["criteria"] = (
            data.get("reward_criteria") or ""
        ).strip() or "accuracy and completeness"
        _check_model(
            data.get("reward_language_model"), "reward_language_model", "judge model", errors
        )
    if data.get("reward_human_marks"):
        # Judge by people: the dataset version's marks first, this reward for the rest
        # (HumanMarks; the worker reads the marks from the run's dataset version).
        reward["judge_by_people"] = True
    config["reward"] = reward

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
    for key in ("epochs", "batch_size", "validation_split", "selection_split"):
        config[key] = _bounded(data, key, TRAINING[key], TRAINING_DEFAULTS[key], errors)
    config["shuffle"] = bool(_value(data, "shuffle", TRAINING_DEFAULTS["shuffle"]))
    seed = _value(data, "seed", secrets.randbelow(2**31))  # stored: a resume replays the order
    config["seed"] = _bounded({"seed": seed}, "seed", TRAINING["seed"], None, errors)
    for key in ("evaluations_before", "evaluations_after"):
        config[key] = _bounded(data, key, TRAINING[key], TRAINING_DEFAULTS[key], errors)

    # Optimizer: its constructor checks its parameters (the bounds it declares).
    name = data.get("optimizer") or optimizer_registry.recommended(label_task=False)
    if not optimizer_registry.offered(name):
        errors["optimizer"] = (
            f"must be one of {', '.join(optimizer_registry.names())}, got {name!r}"
        )
        name = optimizer_registry.recommended(label_task=False)
    prefix = optimizer_registry.card(name).prefix
    config["optimizer"] = {
        "name": name,
        "params": {
            key: _param(_value(data, prefix + key, default), default)
            for key, (default, _bound) in optimizer_parameters(name).items()
        },
    }
    params = config["optimizer"]["params"]
    for key, kind in (("language_model", "language model"), ("embedding_model", "embedding model")):
        if key in params:  # a model the optimizer calls: checked on its own field
            _check_model(data.get(prefix + key), prefix + key, kind, errors)
    if "embedding_model" in params and optimizer_registry.card(name).embeds_pool:
        # the run records the model its pool's vectors come from
        params["embedding_model"] = params["embedding_model"] or settings.TRAINBOARD_EMBEDDING_MODEL
    if not any(field.startswith(prefix) for field in errors):
        _build("optimizer", lambda: build_optimizer(config, _unconnected(config)), errors, prefix)

    # Budget caps (optional; their bounds are training.execution.budget's).
    config.update(budget.caps_from(data, errors))

    if not errors:
        _build("reward", lambda: build_reward(config, program_model=_unconnected(config)), errors)
        _build("metrics", lambda: build_metrics(config), errors)
    if errors:
        raise RunConfigError(errors)
    return config


def _unconnected(config: dict[str, Any]) -> Any:
    """The program's model as the form's check builds the helpers on it: by its string alone
    (its address was checked with the program, and nothing calls it here)."""
    return synalinks.LanguageModel(model=config["model"])


def _bounded(data: dict, key: str, bound: Any, default: Any, errors: dict) -> Any:
    value = _value(data, key, default)
    message = bound.problem(value)
    if message:
        errors[key] = message
    elif isinstance(bound, bounds.FloatRange):
        value = float(value)
    return value


def _param(value: Any, default: Any) -> Any:
    """A parameter as the JSON stores it: strings stripped, floats as floats."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _build(field: str, build: Any, errors: dict, prefix: str = "") -> None:
    """Build an engine object; what it refuses lands on the field it is about.

    A :class:`~training.engine.bounds.ParameterError` names each parameter (the field is
    ``prefix + name``); any other refusal (a local model that cannot run here, a rejected
    model string) lands on ``field``.
    """
    try:
        build()
    except bounds.ParameterError as exc:
        for name, message in exc.errors.items():
            errors[prefix + name] = message
    except (ValueError, TypeError, RuntimeError) as exc:
        errors[field] = str(exc)


# --- builders (used by validation and by the worker) -----------------------------------------


def helper_model(named: str, config: dict[str, Any], program_model: Any = None) -> Any:
    """The language model a run's helper calls (OMEGA's mutations, an LM judge).

    A helper that names no model, or names the program's own, gets the program's model at
    the program's address with its key (``program_model``: the program's connected model,
    from the document the worker loaded): a program on a saved endpoint never has its
    prompts and rows sent to the provider's default address with the server's key. A helper
    that names another model gets that model where its string says.
    """
    named = (named or "").strip()
    if program_model is not None and named in ("", program_model.model):
        return program_model.with_settings(temperature=0.0, max_tokens=None)
    return make_language_model(named or config["model"])


def build_reward(
    config: dict[str, Any],
    marks: list[dict[str, Any]] | None = None,
    program_model: Any = None,
) -> Any:
    """The run's reward; with ``judge_by_people`` wrapped in HumanMarks over ``marks`` (the
    dataset version's, ``datasets.versions.human_marks``). An LM judge's model:
    :func:`helper_model`."""
    reward = _build_base_reward(config, program_model)
    if config["reward"].get("judge_by_people"):
        return synalinks.rewards.HumanMarks(marks=marks or [], fallback=reward)
    return reward


def _build_base_reward(config: dict[str, Any], program_model: Any = None) -> Any:
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
            language_model=helper_model(spec.get("language_model"), config, program_model),
            criteria=spec["criteria"],
            **masks,
        )
    raise ValueError(f"unknown reward {spec['name']!r}")


def fit_kwargs(
    config: dict[str, Any], resume_epoch: int = 0, resume_from: dict | None = None
) -> dict[str, Any]:
    """The arguments of ``Program.fit`` that a run's configuration sets, cast from the stored
    JSON here once (the attempt passes them on as they are).

    Args:
        config: the run's configuration (``validate_run_config``'s result, as stored).
        resume_epoch: the epoch a resumed attempt starts from (0: from the start); never
            past the run's last epoch.
        resume_from: where a pause stopped fit inside ``resume_epoch`` (the engine's
            ``PausePoint`` as stored in ``Run.checkpoint_position``), or None.

    Returns:
        ``validation_split``, ``selection_split``, ``epochs``, ``batch_size``, ``shuffle``,
        ``initial_epoch`` and ``seed``, typed as ``fit`` takes them, and ``resume_from``
        when there is one.

    Example:
        >>> fit_kwargs({**TRAINING_DEFAULTS, "seed": 7})["epochs"]
        3
    """
    epochs = int(config["epochs"])
    kwargs = {
        "validation_split": float(config["validation_split"]),
        "selection_split": float(config["selection_split"]),
        "epochs": epochs,
        "batch_size": int(config["batch_size"]),
        "shuffle": bool(config["shuffle"]),
        "initial_epoch": min(resume_epoch, epochs),
        "seed": int(config["seed"]),
    }
    if resume_from is not None and resume_epoch < epochs:
        kwargs["resume_from"] = resume_from
    return kwargs


def evaluate_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """The arguments of ``Program.evaluate`` that a run's configuration sets (its batch size)."""
    return {"batch_size": int(config["batch_size"])}


def judge_calls(config: dict[str, Any]) -> int:
    """LM calls the run's reward makes per scored example (an LM judge: one; else none)."""
    return 1 if (config.get("reward") or {}).get("name") == "LMAsJudge" else 0


def evaluation_passes(config: dict[str, Any]) -> tuple[int, int]:
    """How many passes over the test split a run makes before and after training."""
    return int(config["evaluations_before"]), int(config["evaluations_after"])


def build_metrics(config: dict[str, Any]) -> list[Any]:
    classes = {name: getattr(synalinks.metrics, name) for name in METRICS}
    return [
        classes[spec["name"]](in_mask=spec.get("in_mask")) for spec in config.get("metrics", [])
    ]


def build_optimizer(config: dict[str, Any], program_model: Any = None) -> Any:
    """The run's optimizer (the registry's class, its stored parameters); a parameter that
    is a model is built here: ``language_model`` by :func:`helper_model`, ``embedding_model``
    from its string (the dashboard's default when the optimizer uses one and names none); a
    string parameter left "" whose default is None is None."""
    spec = config["optimizer"]
    cls = optimizer_registry.get(spec["name"])
    params = dict(spec["params"])
    signature = bounds.defaults(cls)
    for key, value in params.items():
        if value == "" and signature.get(key) is None:
            params[key] = None
    if "language_model" in params:
        params["language_model"] = helper_model(params["language_model"], config, program_model)
    if "embedding_model" in params:
        embedding = params["embedding_model"]
        if not embedding and cls.uses_embedding_model(params):
            embedding = settings.TRAINBOARD_EMBEDDING_MODEL
        params["embedding_model"] = make_embedding_model(embedding) if embedding else None
    return cls(seed=config.get("seed"), **params)


def judge_model(config: dict[str, Any]) -> str:
    """The model an LM judge's calls run on ("" when the reward is no LM judge)."""
    reward = config.get("reward") or {}
    if reward.get("name") != "LMAsJudge":
        return ""
    return reward.get("language_model") or config.get("model") or ""


def optimizer_model(config: dict[str, Any]) -> str:
    """The model whose calls the run's optimizer makes itself (OMEGA's mutations): its
    ``language_model``, else the program's; "" for an optimizer that calls none."""
    spec = config.get("optimizer") or {}
    params = spec.get("params") or {}
    if "language_model" not in optimizer_registry.get(spec.get("name")).PARAMETERS:
        return ""
    return params.get("language_model") or config.get("model") or ""
