"""Optimizer base: the hooks fit calls, candidate bookkeeping, scoring and events.

Lifecycle (called by ``Program.fit``)::

    attach(program, callbacks, scorer, seed)
    on_train_begin(trainable_variables)     # seeds: the starting values become candidates
    for each epoch:
        on_epoch_begin(epoch)
        for each batch:
            on_batch_begin(batch)
            on_batch_end(batch, x, y, y_pred, rewards)   # self.batch_traces is set just before
            settle()                                     # only when fit pauses here
        on_epoch_end(epoch)                 # score pending candidates, propose(), select best
    on_train_end()                          # assign the best candidate of every variable

A variable's pinned examples (``Variable.pin_examples``) are put into every candidate value
here, in ``add_candidate``, whatever the optimizer sampled or mutated.

A candidate is a dict kept on its variable (``variable.candidates``): ``id, epoch, operation
(seed|few_shot|mutation|crossover), parent_ids, value, reward, novelty, status``. Subclasses
(RandomFewShot, OMEGA) mostly override ``propose`` and, for a competition, ``select``.
``score(values)`` evaluates the program on the validation data with ``values`` assigned;
a value set already scored in this fit is not scored again (its reward is remembered, and
predictions are memoised too). The latest ``MAX_SAVED_SCORES`` rewards are saved in the
state (``get_state``: sha256 digests, tagged with the scoring set's key), so a fit resumed
from it (after a pause) does not score them again on the same scoring set.

Which candidate a variable takes (``select`` at each epoch end, ``on_train_end``) is
``selection.champion``: the seed (the starting value) unless a candidate beats it beyond noise
(the paired interval of its gain over the seed on the same scored examples lies above 0; each
scored candidate keeps its per-example rewards, ``example_rewards``, for it). After each
selection a ``selection`` event says, per variable, how many candidates beat the seed
(the :class:`~training.engine.optimizers.champions.Champions` mixin). A saved state is read
back checked (``saved_state.py``).

With a selection split (``fit(selection_split=...)``, ``attach_selection``), ``on_train_end``
scores the top validation candidates on it (``final_selection``) and the variable takes the
best there; a ``final_selection`` event says which were compared and which won.

A scorer that has ``score_examples`` (the trainer's) also gives each example's reward and the
calls' prompt tokens and latency (``trainers/candidate_scores.py``): they ride in the
candidate's ``candidate`` event, never in the candidate dict (saved with the program).
"""

from __future__ import annotations

import copy
import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from training.engine.bounds import MAX_COUNT, Flag, IntRange, ParameterError, check_parameters
from training.engine.language_models.tracing import trace_context
from training.engine.optimizers import label_balance
from training.engine.optimizers import selection as sel
from training.engine.optimizers.card import Card
from training.engine.optimizers.champions import Champions
from training.engine.optimizers.saved_state import rng_from_state, rng_state, scores_from_state
from training.engine.saving import register_synalinks_serializable
from training.engine.trainers.candidate_scores import (
    MAX_SAVED_SCORES,
    assignment_digest,
)
from training.engine.variables import Variable

logger = logging.getLogger(__name__)

OPERATIONS = ("seed", "few_shot", "mutation", "crossover", "by_hand")
#: A value a person writes may hold at most this many characters (as JSON, ``by_hand_size``).
MAX_BY_HAND_CHARS = 20_000


def by_hand_size(value: Any) -> int:
    """The size a candidate by hand is measured by against ``MAX_BY_HAND_CHARS``: its
    characters as JSON (what ``add_by_hand`` refuses, and the dashboard's preview says)."""
    return len(json.dumps(value, default=str))


@register_synalinks_serializable(package="synalinks")
class Optimizer(Champions):
    """Base optimizer. On its own it keeps the starting variables (a no-op that still scores).

    ``PARAMETERS`` declares the limits of the constructor's parameters; subclasses extend it
    with theirs and the constructors check them (forms read the same declarations).

    Args:
        few_shot_learning: Put few-shot examples (inputs with correct outputs) into the prompts.
        nb_min_examples: Fewest few-shot examples sampled into each prompt
            (``PARAMETERS["nb_min_examples"]`` gives the range).
        nb_max_examples: Most few-shot examples sampled into each prompt (at least
            ``nb_min_examples``).
        seed: Seeds the optimizer's own random draws, so a seed fixes its choices.
        name: The optimizer's name (the class name in lower case when None).
    """

    #: What a tool offering this optimizer needs to know (``card.py``); None: not offered.
    CARD: Card | None = None

    PARAMETERS = {
        "few_shot_learning": Flag(
            help="Put few-shot examples (inputs with correct outputs) into the prompts."
        ),
        "nb_min_examples": IntRange(
            0, MAX_COUNT, help="Fewest few-shot examples sampled into each prompt."
        ),
        "nb_max_examples": IntRange(
            0, MAX_COUNT, help="Most few-shot examples sampled into each prompt."
        ),
    }

    def __init__(
        self,
        few_shot_learning: bool = False,
        nb_min_examples: int = 1,
        nb_max_examples: int = 3,
        seed: int | None = None,
        name: str | None = None,
    ):
        check_parameters(
            type(self).__name__,
            Optimizer.PARAMETERS,
            {"nb_min_examples": nb_min_examples, "nb_max_examples": nb_max_examples},
        )
        if nb_max_examples < nb_min_examples:
            raise ParameterError(
                {
                    "nb_max_examples": f"must be at least nb_min_examples ({nb_min_examples}), "
                    f"got {nb_max_examples}"
                },
                type(self).__name__,
            )
        self.few_shot_learning = few_shot_learning
        self.nb_min_examples = int(nb_min_examples)
        self.nb_max_examples = int(nb_max_examples)
        self.seed = seed
        self.name = name or type(self).__name__.lower()
        self.rng = random.Random(seed)
        self.program: Any = None
        self.callbacks: Any = None
        self._scorer: Callable[[dict[str, dict]], Awaitable[float]] | None = None
        self.trainable_variables: list[Variable] = []
        self.batch_traces: list[list[dict]] | None = None
        self.epoch = 0
        self.iterations = 0
        self.candidate_count = 0
        #: ``optimizer_error`` events sent so far (saved in the state: on resume the run's
        #: rows stored past this count are an abandoned attempt's, ``run_state``).
        self.errors_reported = 0
        self.example_pool: dict[str, list[dict]] = {}
        #: How much a candidate must beat the seed by (``selection.tie_margin``).
        self.tie_margin = sel.tie_margin(None)
        #: {digest of a full assignment: validation reward} for this fit's scoring set.
        self._scores: dict[str, float] = {}
        #: The key of the scoring set ``_scores`` are for (``candidate_scores.scoring_set_key``).
        self._scoring_set: str | None = None
        #: ``_scores`` came from a saved state (``set_state``): the next ``attach`` keeps
        #: them when its scorer has the same scoring set.
        self._scores_restored = False
        #: Candidate scorings answered from ``_scores`` (no prediction made).
        self.score_reuses = 0
        #: {assignment key: CandidateScore} when the scorer gives per-example rewards.
        self._details: dict[str, Any] = {}
        #: Scores candidates on the selection split (None: choose on validation alone).
        self._selection_scorer: Callable | None = None

    @classmethod
    def uses_embedding_model(cls, params: dict[str, Any]) -> bool:
        """Whether an instance built with ``params`` calls its ``embedding_model`` (a tool
        gives it the default one then, and loads it before the run)."""
        return "embedding_model" in cls.PARAMETERS

    # -- wiring (trainer) ------------------------------------------------------------------
    def attach(
        self, program: Any, callbacks: Any, scorer: Callable, seed: int | None = None
    ) -> None:
        self.program = program
        self.callbacks = callbacks
        self._scorer = scorer
        # The scoring set is this fit's: its size sets the tie margin, and rewards of another
        # fit's set are not reused (those of a saved state are, on the same set: a resume).
        self.tie_margin = sel.tie_margin(getattr(scorer, "examples", None))
        key = getattr(scorer, "scoring_set_key", None)
        if not (self._scores_restored and key is not None and key == self._scoring_set):
            self._scores = {}
        self._scoring_set, self._scores_restored = key, False
        self._details = {}
        self._selection_scorer = None
        if self.seed is None and seed is not None:
            self.rng = random.Random(seed)

    def forget_saved_scores(self) -> None:
        """The rewards a saved state gave (``set_state``) are not reused by the next
        ``attach``: ``fit`` calls it for a fresh fit, which resumes nothing (its program's
        models may not be those that earned them)."""
        self._scores_restored = False

    def attach_selection(self, scorer: Callable | None) -> None:
        """The selection split's scorer (``fit(selection_split=...)``), or None."""
        self._selection_scorer = scorer

    async def emit(self, event: dict[str, Any]) -> None:
        if event.get("type") == "optimizer_error":
            self.errors_reported += 1
        if self.callbacks is not None:
            await self.callbacks.on_event(event)

    def new_candidate_id(self) -> str:
        self.candidate_count += 1
        return f"c{self.candidate_count}"

    def variable(self, name: str) -> Variable:
        for variable in self.trainable_variables:
            if variable.name == name:
                return variable
        raise KeyError(f"{type(self).__name__}: no trainable variable named {name!r}")

    # -- candidates ------------------------------------------------------------------------
    def add_candidate(
        self,
        variable: Variable,
        value: dict[str, Any],
        operation: str,
        parent_ids: list[str] | None = None,
        candidate_id: str | None = None,
        reward: float | None = None,
    ) -> dict[str, Any]:
        if operation not in OPERATIONS:
            raise ValueError(f"candidate operation must be one of {OPERATIONS}, got {operation!r}")
        candidate = {
            "id": candidate_id or self.new_candidate_id(),
            "epoch": self.epoch,
            "operation": operation,
            "parent_ids": list(parent_ids or []),
            "value": copy.deepcopy(variable.with_pinned(value)),  # pins stay in every one
            "reward": reward,
            "novelty": None,
            "status": "pending",
        }
        return variable.add_candidate(candidate)

    def add_few_shot_child(
        self, variable: Variable, value: dict[str, Any], candidate_id: str | None = None
    ) -> dict[str, Any]:
        """A ``few_shot`` candidate derived from the variable's champion (its parent): what
        every optimizer that samples examples or pools proposes."""
        parent = self.champion(variable)
        parents = [parent["id"]] if parent else []
        return self.add_candidate(variable, value, "few_shot", parents, candidate_id)

    def add_by_hand(
        self, name: str, value: dict[str, Any], parent_ids: list[str] | None = None
    ) -> dict[str, Any]:
        """A person's own candidate for variable ``name`` (e.g. a candidate's instructions
        edited on the dashboard while fit runs): added pending, with operation ``by_hand``,
        and scored like any other at the optimizer's next scoring of pending candidates
        (OMEGA: the next batch end; others: the epoch end); from then on it competes and can
        be a parent as any other. ValueError when ``value`` is not a value of that variable
        (its keys) or is too long. E.g. ``optimizer.add_by_hand("generator/state",
        {**best["value"], "instructions": "..."}, parent_ids=[best["id"]])``.
        """
        variable = self.variable(name)
        if not isinstance(value, dict) or set(value) != set(variable.value):
            raise ValueError(f"a candidate of {name} has the fields {sorted(variable.value)}")
        if by_hand_size(value) > MAX_BY_HAND_CHARS:
            raise ValueError(f"a candidate by hand holds at most {MAX_BY_HAND_CHARS} characters")
        return self.add_candidate(variable, value, "by_hand", parent_ids=parent_ids)

    async def emit_candidate(
        self, variable: Variable, candidate: dict[str, Any], **extra: Any
    ) -> None:
        """Send a ``candidate`` event; ``extra`` adds optional keys (OMEGA's competitions add
        ``embedding`` and ``competition_epoch``)."""
        await self.emit(
            {
                "type": "candidate",
                "epoch": candidate["epoch"],
                "variable": variable.name,
                "candidate_id": candidate["id"],
                "parent_ids": candidate["parent_ids"],
                "operation": candidate["operation"],
                "value": candidate["value"],
                "reward": candidate["reward"],
                "novelty": candidate.get("novelty"),
                "status": candidate["status"],
                **extra,
            }
        )

    async def score(self, values: dict[str, dict[str, Any]]) -> float:
        """Validation reward of the program with ``values`` ({variable name: value}) assigned."""
        if self._scorer is None:
            raise RuntimeError(f"{type(self).__name__} is not attached to a program (call fit)")
        key = self._assignment_key(values)
        if key in self._scores:  # the same values on the same validation set: same reward
            self.score_reuses += 1
            return self._scores[key]
        score_examples = getattr(self._scorer, "score_examples", None)
        if callable(score_examples):
            details = await score_examples(values)
            self._details[key] = details
            reward = details.reward
        else:
            reward = await self._scorer(values)
        self._scores[key] = reward
        return reward

    def score_details(self, values: dict[str, dict[str, Any]]) -> Any:
        """The :class:`CandidateScore` of ``values`` in this fit (None when the scorer gives
        no details or they were not scored)."""
        return self._details.get(self._assignment_key(values))

    def _assignment_key(self, values: dict[str, dict[str, Any]]) -> str:
        """What ``score(values)`` evaluates, as a sha256 digest: every trainable variable's
        value once ``values`` are assigned (the others keep theirs)."""
        full = {v.name: values.get(v.name, v.value) for v in self.trainable_variables}
        full.update(values)
        return assignment_digest(
            json.dumps(full, sort_keys=True, separators=(",", ":"), default=str)
        )

    async def score_candidates(self, group: list[tuple[Variable, dict[str, Any]]]) -> float:
        """Score candidates that go together (one joint assignment), record and emit them."""
        values = {variable.name: candidate["value"] for variable, candidate in group}
        with trace_context(candidate_id=group[0][1]["id"]):  # its validation predictions
            reward = await self.score(values)
        details = self.score_details(values)
        extra = details.event_fields() if details is not None else {}
        for variable, candidate in group:
            candidate["reward"] = reward
            candidate["status"] = "scored"
            if "example_rewards" in extra:  # the evidence the champion rule pairs up
                candidate["example_rewards"] = extra["example_rewards"]
            await self.emit_candidate(variable, candidate, **extra)
        return reward

    async def score_pending(self) -> None:
        """Score every candidate still pending, grouped by candidate id."""
        groups: dict[str, list[tuple[Variable, dict]]] = {}
        for variable in self.trainable_variables:
            for candidate in variable.candidates:
                if candidate.get("reward") is None:
                    groups.setdefault(candidate["id"], []).append((variable, candidate))
        for group in groups.values():
            await self.score_candidates(group)

    # -- hooks -----------------------------------------------------------------------------
    async def on_train_begin(self, trainable_variables: list[Variable]) -> None:
        self.trainable_variables = list(trainable_variables)
        if all(not variable.candidates for variable in self.trainable_variables):
            seed_id = self.new_candidate_id()
            for variable in self.trainable_variables:
                self.add_candidate(variable, variable.get_json(), "seed", candidate_id=seed_id)

    async def on_epoch_begin(self, epoch: int) -> None:
        self.epoch = epoch

    async def on_batch_begin(self, batch: int) -> None:
        pass

    async def on_batch_end(
        self, batch: int, x: Any, y: Any, y_pred: Any, rewards: list[float]
    ) -> None:
        self.iterations += 1
        self.collect_examples(x, y, y_pred, rewards, self.batch_traces)

    async def settle(self) -> None:
        """Finish the work still under way between two batches (fit pauses after it: the
        program's state is then saved, ``trainers/pause_point.py``). Base: none; OMEGA
        awaits the step it started at the last batch end, so the call already paid for is
        kept and the population saved holds its candidate."""

    async def propose(self, epoch: int) -> list[list[tuple[Variable, dict[str, Any]]]]:
        """New candidates for this epoch, as groups scored together. Base: none."""
        return []

    async def on_epoch_end(self, epoch: int) -> None:
        self.epoch = epoch
        await self.score_pending()
        for group in await self.propose(epoch):
            await self.score_candidates(group)
        await self.select(epoch)

    async def on_train_end(self) -> None:
        champions = {v.name: self.champion(v) for v in self.trainable_variables}
        for variable in self.trainable_variables:  # every variable at its validation champion
            if champions[variable.name] is not None:
                variable.assign(champions[variable.name]["value"])
        for variable in self.trainable_variables:
            best = champions[variable.name]
            if best is None:
                continue
            if self._selection_scorer is not None and not getattr(
                self.program, "interrupted", False
            ):  # a cancelled fit keeps its validation champion, scoring nothing more
                best = await self.choose_on_selection(variable, best)
            variable.assign(best["value"])
            best["status"] = "best"
            await self.emit_candidate(variable, best)

    # -- examples (few-shot) ---------------------------------------------------------------
    def collect_examples(self, x, y, y_pred, rewards, traces) -> None:
        """Pool demonstrations: ground truth, or the traces of predictions with full reward."""
        if self.program is None:
            return
        for index, reward in enumerate(rewards):
            # How hard the input was for the program (subclasses may weigh sampling by it).
            difficulty = 1.0 - float(reward if reward is not None else 0.0)
            trace = traces[index] if traces else []
            for example_module, example in self.program.ground_truth_examples(
                x[index], y[index], trace
            ):
                self._add_example(f"{example_module}/state", example, difficulty)
            if reward is not None and reward >= 1.0 and y_pred[index] is not None:
                for step in trace:
                    self._add_example(
                        f"{step['module']}/state",
                        {"inputs": step["inputs"], "outputs": step["outputs"]},
                        0.0,
                    )

    def _add_example(
        self, variable_name: str, example: dict[str, Any], difficulty: float = 0.0
    ) -> None:
        pool = self.example_pool.setdefault(variable_name, [])
        if not any(existing["inputs"] == example["inputs"] for existing in pool):
            pool.append(copy.deepcopy(example))

    def example_labels(self, variable_name: str) -> list[str] | None:
        """Each pooled example's label when the variable's module answers a label set (a
        ``Literal`` field), else None (see ``label_balance.py``)."""
        fields = label_balance.output_labels(self.program, variable_name)
        if not fields:
            return None
        label = label_balance.example_label(list(fields))
        return [label(example) for example in self.example_pool.get(variable_name) or []]

    def sample_examples(self, variable_name: str) -> list[dict[str, Any]] | None:
        """``nb_min..nb_max`` distinct pooled examples (a seeded draw). When the output is a
        label set, the draw is stratified: it covers as many labels as it has examples
        (``label_balance.balanced_indices``); else a plain random sample."""
        pool = self.example_pool.get(variable_name) or []
        if not pool or self.nb_max_examples == 0:
            return None
        high = min(self.nb_max_examples, len(pool))
        low = min(self.nb_min_examples, high)
        count = self.rng.randint(low, high)
        labels = self.example_labels(variable_name)
        if labels is None:
            return self.rng.sample(pool, count)
        return [pool[i] for i in label_balance.balanced_indices(labels, count, self.rng)]

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {
            "few_shot_learning": self.few_shot_learning,
            "nb_min_examples": self.nb_min_examples,
            "nb_max_examples": self.nb_max_examples,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        return cls(**config)

    def get_state(self) -> dict[str, Any]:
        """JSON state saved with the program so a fit can resume (``initial_epoch``)."""
        return {
            "iterations": self.iterations,
            "candidate_count": self.candidate_count,
            "errors_reported": self.errors_reported,
            "epoch": self.epoch,
            "example_pool": copy.deepcopy(self.example_pool),
            "rng": rng_state(self.rng),
            "candidate_scores": {
                "scoring_set_key": self._scoring_set,
                "scores": [
                    [digest, reward]
                    for digest, reward in list(self._scores.items())[-MAX_SAVED_SCORES:]
                ],
            },
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.iterations = int(state.get("iterations", 0))
        self.candidate_count = int(state.get("candidate_count", 0))
        self.errors_reported = int(state.get("errors_reported", 0))
        self.epoch = int(state.get("epoch", 0))
        self.example_pool = copy.deepcopy(state.get("example_pool", {}))
        restored = rng_from_state(state.get("rng"))
        if restored is not None:  # a resumed fit draws what the uninterrupted one would
            self.rng = restored
        # A resumed fit does not score again what it scored (on the same scoring set).
        saved = scores_from_state(state.get("candidate_scores"))
        self._scoring_set, self._scores = saved if saved is not None else (None, {})
        self._scores_restored = saved is not None
