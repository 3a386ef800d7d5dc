"""CalibratedLabels: learn how to decide a label field from the LM's scores and the neighbours.

Why: on label tasks a small model's scores are biased and weak, and the labels of the training
examples nearest to an input often say more (on four TweetEval tasks with ~100 training rows,
SmolLM2-135M's zero-shot answers scored below "always the commonest label" on two, while a
nearest-neighbour vote over MiniLM embeddings did not). Few-shot examples in the prompt did not
fix it: the model copied one label. What works is to combine the evidence at the decision
(kNN prompting, arXiv 2303.13824; "Calibrate Before Use", Zhao et al. 2021): every label is
scored by the LM, then weighed with a bias per label, the vote of the nearest training
examples and a linear read-out of the input's embedding (``modules/label_readout.py``),
each weight learned from the training rows (``modules/label_decision.py``).

How a fit goes (the :class:`Optimizer` hooks):

- every batch: the training rows are predicted as usual; a Generator whose output is one label
  field scores every label, and its trace step carries those scores; they are kept per row
  with the row's label and what the program answered (no extra LM call);
- at each epoch end: the training examples are pooled and embedded (as ``NearestFewShot``
  does, each text once per fit), each row's label counts among its nearest pool examples are
  computed with the row itself left out, and :func:`label_decision.fit_decision` chooses and
  fits the decision by cross-validation on the rows; the candidate is the current value with
  that ``decision`` (and, when the vote helps, a ``retrieval`` pool that votes but is not put
  in the prompt, so the LM's scores stay what they were);
- the candidate is scored on the validation data like any other and replaces the seed only
  when it beats it beyond noise (``selection.champion``). Its evidence also holds the
  training rows, each predicted by a decision fitted without it (5-fold cross-fitting, the
  choice of configuration repeated inside each fold): the seed's answers there are the ones
  the training pass recorded, the candidate's come from the stored scores, with no LM call.

Cost: no LM call of its own; the embedding calls of the pool (once per fit, batched) and one
per distinct input predicted with a vote. A model that cannot score labels gives no scores: the
optimizer then proposes the ``NearestFewShot`` pool (examples in the prompt) instead.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.engine.bounds import Flag, check_parameters
from training.engine.modules import example_retrieval as retrieval
from training.engine.modules import label_decision, label_readout
from training.engine.optimizers.card import ONCE, Card
from training.engine.optimizers.nearest_few_shot import DEFAULT_K, NearestFewShot
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.variables import Variable

#: Folds of the cross-fitting that predicts each training row with a decision fitted without it.
CROSS_FIT_FOLDS = 5


@register_synalinks_serializable(package="synalinks")
class CalibratedLabels(NearestFewShot):
    """``CalibratedLabels(embedding_model=em, vote=True)``.

    Args:
        embedding_model: embeds the training examples and each input for the neighbours'
            vote (the dashboard's default is ``local/minilm``); not needed with
            ``vote=False``.
        vote: let the labels of the nearest training examples and a linear read-out of
            the input's embedding count in the decision (their weights learned, 0 when they
            do not help); False: a bias per label only.
        pool_size: most training examples kept for the vote.
        seed: seeds the cross-validation's folds and which examples stay in a full pool.
        name: the optimizer's name.

    Example:

    ```python
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["label"]),
        optimizer=synalinks.optimizers.CalibratedLabels(
            embedding_model=synalinks.EmbeddingModel(model="local/minilm")
        ),
    )
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1)
    ```
    """

    CARD = Card(
        prefix="cal_",
        help=(
            "scores every label, then learns a bias per label and how much the labels of the "
            "nearest training examples and a read-out of the input's embedding count, from "
            "the training rows (no extra LM calls). The one to pick when the program answers "
            "a label set."
        ),
        primary="vote",
        proposes=ONCE,
        embeds_pool=True,
        label_tasks=True,
        cross_fits=True,
        epochs=1,
    )
    PARAMETERS = {
        "embedding_model": Flag(
            help="Embeds training inputs and each new input to find the nearest examples."
        ),
        "vote": Flag(help="Let the labels of the nearest training examples count."),
        "pool_size": retrieval.POOL_SIZE,
    }

    def __init__(
        self,
        embedding_model: Any = None,
        vote: bool = True,
        pool_size: int = 256,
        seed: int | None = None,
        name: str | None = None,
    ):
        # NearestFewShot's pool and embeddings, without its ``k`` (the fit chooses how many
        # neighbours vote) and with the embedding model optional (not needed without a vote)
        Optimizer.__init__(self, few_shot_learning=True, seed=seed, name=name)
        check_parameters("CalibratedLabels", self.PARAMETERS, {"pool_size": pool_size})
        if vote and embedding_model is None:
            raise ValueError(
                "CalibratedLabels(vote=True) needs embedding_model=... to find the training "
                'examples nearest to each input (e.g. EmbeddingModel(model="local/minilm")), '
                "or vote=False for a bias per label only"
            )
        self.vote = bool(vote)
        # A program with no label field to decide gets NearestFewShot's pool, as it would
        # with its defaults (``propose``).
        self.k = DEFAULT_K
        self._init_pool(embedding_model, pool_size)
        #: {variable name: {inputs key: {"scores", "labels", "label", "inputs",
        #: "seed_reward", "seed_correct"}}}: what each training row's scoring measured.
        self.scored_rows: dict[str, dict[str, dict[str, Any]]] = {}
        #: {variable name: the last fit's FittedDecision} (what the page and tests read).
        self.fits: dict[str, Any] = {}

    @classmethod
    def uses_embedding_model(cls, params: dict[str, Any]) -> bool:
        return bool(params.get("vote", True))

    # -- collecting --------------------------------------------------------------------------
    def collect_examples(self, x, y, y_pred, rewards, traces) -> None:
        super().collect_examples(x, y, y_pred, rewards, traces)
        if self.program is None or not traces:
            return
        seeds = {v.name: _seed_value(v) for v in self.trainable_variables}
        for index, trace in enumerate(traces):
            for module_name, example in self.program.ground_truth_examples(
                x[index], y[index], trace or []
            ):
                name = f"{module_name}/state"
                step = next(
                    (
                        s
                        for s in reversed(trace or [])
                        if s.get("module") == module_name and s.get("label_scores")
                    ),
                    None,
                )
                if step is None or name not in seeds:
                    continue
                scored = step["label_scores"]
                field = scored["field"]
                row = self.scored_rows.setdefault(name, {}).setdefault(
                    retrieval.same_inputs_key(example["inputs"]), {}
                )
                row.update(
                    scores=list(scored["scores"]),
                    labels=list(scored["labels"]),
                    label=(example["outputs"] or {}).get(field),
                    inputs=example["inputs"],
                )
                if self.variable(name).value == seeds[name] and "seed_reward" not in row:
                    answered = (step.get("outputs") or {}).get(field)
                    row["seed_reward"] = float(rewards[index] or 0.0)
                    row["seed_correct"] = float(answered == row["label"])

    # -- candidates --------------------------------------------------------------------------
    async def propose(self, epoch: int) -> list[list[tuple[Variable, dict[str, Any]]]]:
        candidate_id = self.new_candidate_id()
        group = []
        pools = []
        for variable, module in self.retrievers():
            rows = list((self.scored_rows.get(variable.name) or {}).values())
            label = module.label_field() if hasattr(module, "label_field") else None
            if label is None or len(rows) < max(2 * len(label[1]), 8):
                pools.append((variable, module))  # nothing to calibrate: the pool instead
                continue
            value, evidence = await self._calibrated(variable, module, label, rows)
            if value == variable.value or any(c["value"] == value for c in variable.candidates):
                continue
            candidate = self.add_few_shot_child(variable, value, candidate_id=candidate_id)
            # Thousands of small fits on a large split: off the event loop, so a cancel or a
            # pause is still heard meanwhile.
            candidate["held_out"] = await asyncio.to_thread(self._held_out, rows, label, evidence)
            group.append((variable, candidate))
        if pools and self.embedding_model is not None and not group:
            return await super().propose(epoch)
        return [group] if group else []

    async def _calibrated(
        self, variable: Variable, module: Any, label: tuple[str, list[str]], rows: list[dict]
    ) -> tuple[dict[str, Any], RowEvidence]:
        """(the current value with a decision fitted on ``rows``, and a vote-only pool when
        the vote is part of it; what the fit used of the rows besides their LM scores)."""
        field, labels = label
        value = copy.deepcopy(variable.value)
        existing = value.get("retrieval")
        evidence = RowEvidence()
        if self.vote and self.embedding_model is not None:
            evidence = await self._neighbour_counts(variable, module, rows, existing)
        fitted = await asyncio.to_thread(
            label_decision.fit_decision,
            labels,
            field,
            [row["scores"] for row in rows],
            _one_hot(labels, [row["label"] for row in rows]),
            evidence.counts,
            seed=self.rng.randrange(2**31),
            vectors=evidence.vectors,
            embedding_model=evidence.embedding_model,
        )
        self.fits[variable.name] = fitted
        value["decision"] = fitted.decision
        if fitted.vote_k and existing is None and evidence.settings is not None:
            value["retrieval"] = {**evidence.settings, "k": fitted.vote_k}
        return value, evidence

    async def _neighbour_counts(
        self, variable: Variable, module: Any, rows: list[dict], existing: dict | None
    ) -> RowEvidence:
        """Each row's label counts among its k nearest pool examples (itself left out) for
        the ``k`` worth trying (the existing pool's own ``k`` when the value has one: its
        prompt shows those neighbours), each row's input vector, and the vote-only
        retrieval settings."""
        field, labels = module.label_field()
        model = self.model_of(module)
        settings = None
        if existing:
            pool, ks = existing.get("pool") or [], [int(existing.get("k", 1))]
        else:
            pool = await self.embedded(model, self.pool_examples(variable.name))
            ks = [k for k in label_decision.VOTE_KS if k < len(pool)]
            settings = {
                "embedding_model": str(getattr(model, "model", "")),
                "vote": False,
                "in_prompt": False,
                "pool": pool,
            }
        if not pool or not ks:
            return RowEvidence(settings=settings)
        matrix = retrieval.pool_matrix(pool)
        keys = [retrieval.same_inputs_key(entry["inputs"]) for entry in pool]
        pool_labels = [(entry.get("outputs") or {}).get(field) for entry in pool]
        counts = {k: np.zeros((len(rows), len(labels))) for k in ks}
        vectors = np.zeros((len(rows), matrix.shape[1]))
        where = {key: i for i, key in enumerate(keys)}
        for r, row in enumerate(rows):
            own = retrieval.same_inputs_key(row["inputs"])
            if own in where:  # a pooled row: its vector is in the pool already
                query = matrix[where[own]]
            else:
                query = await module.query_vector(model, retrieval.retrieval_text(row["inputs"]))
            vectors[r] = query
            excluded = [i for i, key in enumerate(keys) if key == own]
            nearest = retrieval.nearest_indices(matrix, query, max(ks), excluded)
            for k in ks:
                counts[k][r] = label_decision.neighbour_counts(
                    labels, [pool_labels[i] for i in nearest[:k]]
                )
        return RowEvidence(counts, vectors, str(getattr(model, "model", "")), settings)

    def _held_out(
        self, rows: list[dict], label: tuple[str, list[str]], evidence: RowEvidence
    ) -> dict[str, list[float]]:
        """The cross-fitted evidence: each training row the seed was recorded on, predicted by
        a decision fitted on the other folds (its configuration chosen there too); the seed's
        and the candidate's rewards on them. Empty when the program's reward on those rows is
        not the label's accuracy (the two would not be one measure) or too few were recorded."""
        kept = [i for i, row in enumerate(rows) if "seed_reward" in row]
        recorded = [rows[i] for i in kept]
        if len(recorded) < CROSS_FIT_FOLDS * 2 or any(
            row["seed_reward"] != row["seed_correct"] for row in recorded
        ):
            return {}
        field, labels = label
        scores = np.array([row["scores"] for row in recorded], dtype=np.float64)
        rewards = _one_hot(labels, [row["label"] for row in recorded])
        votes = {k: np.asarray(c)[kept] for k, c in evidence.counts.items()}
        vectors = None if evidence.vectors is None else evidence.vectors[kept]
        order = list(range(len(recorded)))
        self.rng.shuffle(order)
        predicted = np.zeros(len(recorded), dtype=int)
        for fold in (order[i::CROSS_FIT_FOLDS] for i in range(CROSS_FIT_FOLDS)):
            rest = sorted(set(range(len(recorded))) - set(fold))
            inner = label_decision.fit_decision(
                labels,
                field,
                scores[rest],
                rewards[rest],
                {k: c[rest] for k, c in votes.items()},
                seed=self.rng.randrange(2**31),
                vectors=None if vectors is None else vectors[rest],
                embedding_model=evidence.embedding_model,
            )
            k = inner.vote_k
            readout = None
            if inner.decision.get("readout") is not None:
                readout = label_readout.readout_scores(
                    *label_readout.from_json(inner.decision["readout"], labels), vectors[fold]
                )
            for position, i in enumerate(fold):
                predicted[i], _ = label_decision.decide(
                    scores[i],
                    labels,
                    inner.decision,
                    votes[k][i] if k else None,
                    k,
                    None if readout is None else readout[position],
                )
        return {
            "seed": [row["seed_reward"] for row in recorded],
            "candidate": [float(rewards[i, p] > 0) for i, p in enumerate(predicted)],
        }

    # -- saving ----------------------------------------------------------------------------
    def forget_saved_scores(self) -> None:
        super().forget_saved_scores()
        self.scored_rows = {}  # a fresh fit scores its own rows

    def get_state(self) -> dict[str, Any]:
        """The base state and the rows scored so far (a fit paused mid-epoch resumes with
        them, as it resumes with its example pool)."""
        return {**super().get_state(), "scored_rows": copy.deepcopy(self.scored_rows)}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        saved = state.get("scored_rows")
        self.scored_rows = copy.deepcopy(saved) if isinstance(saved, dict) else {}

    def get_config(self) -> dict[str, Any]:
        return {
            "embedding_model": (
                serialize(self.embedding_model) if self.embedding_model is not None else None
            ),
            "vote": self.vote,
            "pool_size": self.pool_size,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: dict | None = None
    ) -> CalibratedLabels:
        config = dict(config)
        if config.get("embedding_model") is not None:
            config["embedding_model"] = deserialize(config["embedding_model"], custom_objects)
        return cls(**config)


@dataclass
class RowEvidence:
    """What a decision is fitted on besides the rows' LM scores: each row's label counts
    among its nearest pool examples by ``k`` (itself left out), each row's input vector (for
    the embedding read-out) and the model that made them, and the vote-only retrieval
    settings a candidate takes when the vote is part of its decision."""

    counts: dict[int, np.ndarray] = field(default_factory=dict)
    vectors: np.ndarray | None = None
    embedding_model: str = ""
    settings: dict[str, Any] | None = None


def _seed_value(variable: Variable) -> Any:
    seed = next((c for c in variable.candidates if c.get("operation") == "seed"), None)
    return seed["value"] if seed is not None else variable.value


def _one_hot(labels: list[str], truths: list[Any]) -> np.ndarray:
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(truths), len(labels)))
    for row, truth in enumerate(truths):
        if truth in index:
            matrix[row, index[truth]] = 1.0
    return matrix


__all__ = ["CalibratedLabels"]
