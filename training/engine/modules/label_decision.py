"""How a Generator decides a label field from scores: the LM's, a bias, a vote, a read-out.

Why: a small model's label scores are biased (the local 135M model answered 2 of 4 labels, below
"always the commonest label"), and on label tasks the labels of the nearest training examples
often say more than the model does. So a label field is decided, not sampled: every label is
scored by the LM (its log-probability as the field's value, ``LanguageModel.score_labels``),
and the label with the best *decision score* wins:

    score(label) = lm_weight × log P_LM(label) + bias[label] + vote_weight × vote(label)
                   + readout_weight × readout(label)

where ``log P_LM`` is the LM's distribution over the labels (log-softmax of their scores),
``vote(label) = log((n + 1) / (k + C))``, ``n`` being how many of the ``k`` nearest pool
examples (the state's ``retrieval``) have that label, ``C`` the number of labels, and
``readout(label)`` a linear read-out of the input's embedding (``label_readout.py``). Without
a ``decision`` in the state the weights are 1, 0 and no bias: the LM's best label.

The decision is part of the Generator's state, a trainable JSON value like its instructions and
examples (saved, loaded, shown and diffed; no model weight changes)::

    "decision": {"field": "label", "bias": {"anger": 0.4, "joy": -1.2},
                 "lm_weight": 0.8, "vote_weight": 1.5,
                 "readout_weight": 2.0, "readout": {...}}  # the last two optional

:func:`fit_decision` learns it from training rows (the ``CalibratedLabels`` optimizer): the
weights and biases of a softmax over decision scores, fitted by Newton's method on a
regularised cross-entropy, with the configuration (which parts, ``k``, the regularisation)
chosen by cross-validated reward on the training rows. Which parts help is measured on the
data, never assumed: on a task where the LM's scores carry nothing, its weight goes to 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from training.engine.modules import label_readout

#: Largest absolute weight or bias a stored decision may hold (a loaded document is bounded).
MAX_WEIGHT = 100.0
#: Labels a decision may name (the grammar's label sets are far smaller).
MAX_LABELS = 200
#: Neighbour counts tried for the vote, when the pool has that many rows to spare.
VOTE_KS = (3, 5, 10, 20)
#: The vote's ``k`` beside an embedding read-out.
VOTE_K = 5
#: L2 strengths tried (the penalty added to the mean cross-entropy is ``strength × |θ|²``).
#: Measured on four TweetEval tasks × 3 draws (80 fitting rows): 0.001-0.03 gave a mean test
#: accuracy of 0.604 against 0.591 for 0.003-0.3 (0.3 shrank every weight to the majority);
#: choosing by cross-validated log-loss instead of reward gave 0.598-0.604.
STRENGTHS = (0.001, 0.01, 0.03)
#: Folds of the cross-validation that chooses the configuration.
FOLDS = 5
#: Newton steps at most per fit (each halves its step until the loss goes down).
NEWTON_STEPS = 50


def decision_schema(labels: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON schema of a Generator state's ``decision`` (its bounds)."""
    bound = {"type": "number", "minimum": -MAX_WEIGHT, "maximum": MAX_WEIGHT}
    bias: dict[str, Any] = {"type": "object", "maxProperties": MAX_LABELS}
    if labels:
        bias["properties"] = {label: bound for label in labels}
        bias["additionalProperties"] = False
    else:
        bias["additionalProperties"] = bound
    return {
        "type": "object",
        "description": (
            "How the label field is decided from the LM's label scores, a bias per label and "
            "the nearest training examples' labels (CalibratedLabels)"
        ),
        "properties": {
            "field": {"type": "string", "maxLength": 200},
            "bias": bias,
            "lm_weight": bound,
            "vote_weight": bound,
            "readout_weight": bound,
            "readout": label_readout.readout_schema(),
        },
        "required": ["field", "bias", "lm_weight", "vote_weight"],
    }


def log_softmax(values: Any) -> np.ndarray:
    """Log-softmax along the last axis (the LM's scores as a distribution over the labels)."""
    array = np.asarray(values, dtype=np.float64)
    shifted = array - array.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def vote(counts: Any, k: int) -> np.ndarray:
    """``log((n + 1) / (k + C))`` for each label's neighbour count ``n`` (add-one smoothed)."""
    array = np.asarray(counts, dtype=np.float64)
    return np.log((array + 1.0) / (k + array.shape[-1]))


def neighbour_counts(labels: Sequence[str], neighbours: Sequence[Any]) -> np.ndarray:
    """How many of ``neighbours`` (their labels) have each of ``labels``."""
    index = {label: i for i, label in enumerate(labels)}
    counts = np.zeros(len(labels))
    for label in neighbours:
        if label in index:
            counts[index[label]] += 1
    return counts


def check_decision(decision: Any, labels: Sequence[str]) -> dict[str, Any]:
    """``decision`` as stored, checked (ValueError with what is wrong): its bias names only
    ``labels``, every number is finite and within ``MAX_WEIGHT``."""
    if not isinstance(decision, dict):
        raise ValueError("a decision is an object with field, bias, lm_weight, vote_weight")
    bias = decision.get("bias") or {}
    if not isinstance(bias, dict) or set(bias) - set(labels):
        raise ValueError(f"a decision's bias names labels outside {list(labels)}")
    numbers = [
        decision.get("lm_weight", 1.0),
        decision.get("vote_weight", 0.0),
        decision.get("readout_weight", 0.0),
        *bias.values(),
    ]
    for number in numbers:
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or not math.isfinite(number)
            or abs(number) > MAX_WEIGHT
        ):
            raise ValueError(f"a decision's weights are numbers within ±{MAX_WEIGHT:g}")
    if decision.get("readout") is not None:
        label_readout.from_json(decision["readout"], labels)
    return decision


def decide(
    log_probs: Sequence[float],
    labels: Sequence[str],
    decision: dict[str, Any] | None,
    counts: Any = None,
    k: int = 0,
    readout: Any = None,
) -> tuple[int, np.ndarray]:
    """(the index of the label decided, every label's decision score).

    Args:
        log_probs: the LM's score of each label (any log scale: normalised here).
        labels: the labels, in the order of ``log_probs``.
        decision: the state's ``decision`` (None: the LM's best label).
        counts: each label's count among the ``k`` nearest pool examples (None: no vote).
        k: how many neighbours were counted.
        readout: each label's read-out score for the input (None: no read-out).

    Ties go to the label listed first.
    """
    scores = log_softmax(log_probs)
    if decision:
        check_decision(decision, labels)
        bias = decision.get("bias") or {}
        scores = float(decision.get("lm_weight", 1.0)) * scores
        scores = scores + np.array([float(bias.get(label, 0.0)) for label in labels])
        weight = float(decision.get("vote_weight", 0.0))
        if weight and counts is not None and k > 0:
            scores = scores + weight * vote(counts, k)
        weight = float(decision.get("readout_weight", 0.0))
        if weight and readout is not None:
            scores = scores + weight * np.asarray(readout, dtype=np.float64)
    return int(np.argmax(scores)), scores


def decide_for_input(
    log_probs: Sequence[float],
    labels: Sequence[str],
    decision: dict[str, Any] | None,
    field: str,
    retrieved: Sequence[dict[str, Any]],
    readout: Any = None,
) -> int:
    """The index of the label decided for one input: :func:`decide` with the vote of the
    ``retrieved`` pool examples (their ``outputs[field]``), as the Generator and the
    plain-prompt re-scorer both decide."""
    counts = neighbour_counts(
        labels, [(example.get("outputs") or {}).get(field) for example in retrieved]
    )
    index, _ = decide(log_probs, labels, decision, counts, len(retrieved), readout)
    return index


# -- learning a decision ---------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One configuration the cross-validation compares: which parts, ``k``, the penalty."""

    use_lm: bool
    k: int  # 0: no vote
    strength: float
    readout: bool = False

    @property
    def parts(self) -> str:
        named = [
            name
            for name, on in (
                ("LM scores", self.use_lm),
                (f"{self.k}-NN vote", self.k),
                ("embedding read-out", self.readout),
            )
            if on
        ]
        return " + ".join([*named, "bias"])


@dataclass
class FittedDecision:
    """What :func:`fit_decision` found: the decision, its configuration, and the mean reward
    each configuration earned in cross-validation (the evidence for the choice)."""

    decision: dict[str, Any]
    config: Config
    vote_k: int
    cv_reward: float
    train_reward: float
    compared: dict[str, float]


def _design(features: list[np.ndarray], rows: int, count: int) -> np.ndarray:
    """(rows, labels, parameters): each feature's column, then one bias column per label."""
    bias = np.broadcast_to(np.eye(count), (rows, count, count))
    columns = [f[:, :, None] for f in features]
    return np.concatenate([*columns, bias], axis=2) if columns else np.array(bias)


def _newton(design: np.ndarray, targets: np.ndarray, strength: float) -> np.ndarray:
    """Parameters minimising mean soft-target cross-entropy + ``strength`` × |θ|² (convex)."""
    rows, _, size = design.shape
    theta = np.zeros(size)

    def loss(values: np.ndarray) -> float:
        logp = log_softmax(np.einsum("rcp,p->rc", design, values))
        return float(-(targets * logp).sum() / rows + strength * values @ values)

    current = loss(theta)
    for _ in range(NEWTON_STEPS):
        probs = np.exp(log_softmax(np.einsum("rcp,p->rc", design, theta)))
        gradient = np.einsum("rcp,rc->p", design, probs - targets) / rows + 2 * strength * theta
        weighted = np.einsum("rcp,rc->rp", design, probs)
        hessian = (
            np.einsum("rcp,rc,rcq->pq", design, probs, design)
            - np.einsum("rp,rq->pq", weighted, weighted)
        ) / rows + 2 * strength * np.eye(size)
        step = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while scale > 1e-4:
            candidate = theta - scale * step
            value = loss(candidate)
            if value <= current:
                break
            scale /= 2
        else:
            break
        theta, improvement = candidate, current - value
        current = value
        if improvement < 1e-9:
            break
    return np.clip(theta, -MAX_WEIGHT, MAX_WEIGHT)


def _features(
    config: Config, lm: np.ndarray, votes: dict[int, np.ndarray], readout: np.ndarray | None
) -> list[np.ndarray]:
    found = []
    if config.use_lm:
        found.append(lm)
    if config.k:
        found.append(votes[config.k])
    if config.readout:
        found.append(readout)
    return found


def _reward(scores: np.ndarray, rewards: np.ndarray) -> float:
    picks = scores.argmax(axis=1)
    return float(rewards[np.arange(len(picks)), picks].mean())


def _soft_targets(rewards: np.ndarray) -> np.ndarray:
    """Each row's best-rewarded labels as a distribution (what the fit is pulled towards)."""
    best = (rewards >= rewards.max(axis=1, keepdims=True) - 1e-12).astype(np.float64)
    return best / best.sum(axis=1, keepdims=True)


def fit_decision(
    labels: Sequence[str],
    field: str,
    lm_scores: Any,
    rewards: Any,
    neighbour_counts_by_k: dict[int, Any],
    seed: int | None = None,
    use_lm: Sequence[bool] = (True, False),
    strengths: Sequence[float] = STRENGTHS,
    vectors: Any = None,
    embedding_model: str = "",
) -> FittedDecision:
    """Learn a ``decision`` from training rows.

    Args:
        labels: the field's labels.
        field: the label field's name.
        lm_scores: (rows, labels) the LM's score of each label for each training row.
        rewards: (rows, labels) the reward each row earns when the decision answers each label
            (ExactMatch: 1 for the row's label, else 0): the fit serves any reward.
        neighbour_counts_by_k: {k: (rows, labels) label counts among each row's ``k`` nearest
            pool examples, the row itself left out}; {} for no vote.
        seed: seeds the cross-validation's folds.
        use_lm: whether the LM's scores may be a part (``(False,)``: a model that cannot
            score labels; ``(True,)``: always).
        vectors: (rows, dimensions) each row's input embedding: an embedding read-out may
            be a part (its scores for a row come from a read-out fitted without the row's
            fold); None: no read-out.
        embedding_model: the model that made ``vectors`` (stored with the read-out: a new
            input is embedded by it).

    Returns:
        A :class:`FittedDecision`: the configuration with the best mean reward over
        :data:`FOLDS`-fold cross-validation (ties: the simpler, then the more regularised),
        refitted on every row.
    """
    lm = log_softmax(np.asarray(lm_scores, dtype=np.float64))
    reward_matrix = np.asarray(rewards, dtype=np.float64)
    rows, count = reward_matrix.shape
    votes = {
        int(k): vote(np.asarray(c, dtype=np.float64), int(k))
        for k, c in neighbour_counts_by_k.items()
    }
    targets = _soft_targets(reward_matrix)
    order = list(range(rows))
    random.Random(seed).shuffle(order)
    folds = [order[i::FOLDS] for i in range(min(FOLDS, rows))] if rows >= 2 else [order]
    readout = None
    if vectors is not None and rows >= 2 * FOLDS:
        readout = label_readout.out_of_fold(vectors, targets, folds)
    if readout is not None:
        # Every part in, the vote of VOTE_K or none: each choice the cross-validation makes
        # on ~100 rows is noise it can fit (choosing the parts as well cost 0.05 on a task).
        ks = [0, *([min(votes, key=lambda k: abs(k - VOTE_K))] if votes else [])]
        configs = [Config(use_lm[0], k, s, True) for k in ks for s in strengths]
    else:
        configs = [
            Config(lm_part, k, strength)
            for lm_part in use_lm
            for k in [0, *sorted(votes)]
            for strength in strengths
            if lm_part or k
        ] or [Config(False, 0, s) for s in strengths]
    compared: dict[Config, float] = {}
    for config in configs:
        design = _design(_features(config, lm, votes, readout), rows, count)
        earned = []
        for fold in folds:
            held = np.zeros(rows, dtype=bool)
            held[fold] = True
            if held.all():
                held[:] = False
            theta = _newton(design[~held], targets[~held], config.strength)
            scores = np.einsum("rcp,p->rc", design[held], theta) if held.any() else None
            if scores is not None:
                earned.append(_reward(scores, reward_matrix[held]) * held.sum())
        compared[config] = float(sum(earned) / rows) if earned else 0.0

    def simplicity(config: Config) -> tuple:
        parts = config.use_lm + bool(config.k) + config.readout
        return (compared[config], -parts, config.strength)

    best = max(configs, key=simplicity)
    design = _design(_features(best, lm, votes, readout), rows, count)
    theta = _newton(design, targets, best.strength)
    weights = {"lm_weight": 0.0, "vote_weight": 0.0, "readout_weight": 0.0}
    position = 0
    for name, on in (
        ("lm_weight", best.use_lm),
        ("vote_weight", best.k),
        ("readout_weight", best.readout),
    ):
        if on:
            weights[name], position = float(theta[position]), position + 1
    bias = {label: round(float(b), 4) for label, b in zip(labels, theta[position:], strict=True)}
    decision: dict[str, Any] = {
        "field": field,
        "bias": bias,
        "lm_weight": round(weights["lm_weight"], 4),
        "vote_weight": round(weights["vote_weight"], 4),
    }
    if best.readout:
        decision["readout_weight"] = round(weights["readout_weight"], 4)
        decision["readout"] = label_readout.to_json(
            *label_readout.fit_readout(vectors, targets), labels, embedding_model
        )
    train = _reward(np.einsum("rcp,p->rc", design, theta), reward_matrix)
    return FittedDecision(
        decision=decision,
        config=best,
        vote_k=best.k,
        cv_reward=compared[best],
        train_reward=train,
        compared={f"{c.parts} (penalty {c.strength:g})": round(r, 4) for c, r in compared.items()},
    )


__all__ = [
    "FittedDecision",
    "check_decision",
    "decide",
    "decision_schema",
    "fit_decision",
    "log_softmax",
    "neighbour_counts",
    "vote",
]
