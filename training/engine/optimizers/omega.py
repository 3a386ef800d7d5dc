"""OMEGA (OptiMizEr as Genetic Algorithm): LLM mutation/crossover + Dominated Novelty Search.

How a fit goes (the hooks of :class:`Optimizer`):

- ``on_train_begin``: the starting variables become the seed candidates.
- every batch (``on_batch_end``): pick a variable (p ∝ exp(−its population's mean reward)),
  pick parent(s) from its population (``selection``), and make one new candidate — a crossover
  of two parents with probability ``merging_rate × epoch`` (falls back to mutation with fewer
  than two candidates), else a mutation. Both are ChainOfThought programs that reason on the
  batch (inputs, predictions, ground truth, rewards) and the variable's description, and emit a
  value constrained to the variable's JSON schema (see ``mutation.py``). With
  ``few_shot_learning`` the new value also gets freshly sampled examples. The candidate is
  scored on the validation data at once, so the next batch can already build on it. A failed
  LM call is logged, reported as an ``optimizer_error`` event and skipped. Junk text (empty,
  punctuation only, much shorter than its parent, repeating itself, naming labels outside the
  label set, or the parent's unchanged: ``candidate_checks.py``) is refused before it is
  scored: counted in ``refusals`` by rule and reported as a ``candidate_refused`` event; with
  fresh examples the step still proposes the parent's few-shot variant (``evolution.py``).
- ``on_epoch_end``: the competition. ``algorithm="dns"``: Dominated Novelty Search over each
  variable's population (``dns.py``); distances are cosine distances between candidate
  embeddings, each distinct value embedded once (cached by content hash) and all pairs computed
  in one numpy operation, or a custom async ``distance_function``. ``algorithm="ga"``: the top
  ``population_size`` by reward. Every competitor is emitted as ``kept`` or ``dropped`` (with
  ``competition_epoch`` and, when DNS embedded it, a bounded ``embedding`` for the dashboard's
  population map; ``competition.py``); each variable is then assigned its best candidate.
- ``on_train_end``: the best candidates are assigned and emitted as ``best``.

Construction refuses the guide's pitfalls with clear errors (see ``__init__``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import numpy as np

from training.engine.bounds import Choice, Flag, FloatRange, check_parameters, with_help
from training.engine.optimizers import dns, label_balance
from training.engine.optimizers import selection as sel
from training.engine.optimizers.card import EDITABLE, INSTRUCTIONS, STEPS, Card
from training.engine.optimizers.competition import Competition
from training.engine.optimizers.evolution import Evolution
from training.engine.optimizers.mutation import (
    FROZEN_FIELDS,
    VariableEvolver,
    batch_report,
    canonical,
)
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.variables import Variable

logger = logging.getLogger(__name__)

ALGORITHMS = ("dns", "ga")
SELECTIONS = sel.SELECTIONS
TEMPERATURES = (
    "mutation_temperature",
    "crossover_temperature",
    "selection_temperature",
    "sampling_temperature",
)
#: Every temperature must be above 0 (0 breaks the softmax). The bound is closed at 0.01 so a
#: browser can enforce it exactly; below it the softmax already picks the best every time.
TEMPERATURE = FloatRange(0.01)


def _is_async_callable(function: Any) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@register_synalinks_serializable(package="synalinks")
class OMEGA(Evolution, Competition, Optimizer):
    """OMEGA: evolves the trainable variables with LM-written mutations and crossovers.

    Each batch end picks parents (``selection``), asks ``language_model`` for a mutation or a
    crossover (probability ``merging_rate`` × epoch), scores the new candidate and keeps a
    population of good and, with ``algorithm="dns"``, mutually different candidates. Junk
    rewrites are refused before they are scored (``candidate_checks``). Every parameter of the
    guide is accepted; ``PARAMETERS`` holds their ranges.

    Args:
        language_model: The LM that reasons about mutations and crossovers. Required.
        embedding_model: Embeds candidates so DNS can measure how different they are
            (required for ``algorithm="dns"`` unless ``distance_function`` is given).
        k_nearest_fitter: Neighbours DNS compares a candidate with.
        distance_function: An async ``distance(c1, c2, embedding_model=None, **kwargs)``
            replacing the embedding distance.
        mutation_temperature: Creativity of mutations: lower is conservative.
        crossover_temperature: Creativity of crossovers: lower is conservative.
        selection_temperature: Softmax selection of parents: lower is greedier.
        sampling_temperature: Few-shot sampling: lower favours the examples the program got
            wrong.
        few_shot_learning: Also draw few-shot examples into candidates (stratified on a label
            set).
        nb_min_examples: Fewest few-shot examples per candidate.
        nb_max_examples: Most few-shot examples per candidate.
        merging_rate: Crossover probability per epoch: ``merging_rate`` × epoch number.
        population_size: Candidates kept between steps (at least 2: crossover needs two).
        algorithm: ``"dns"`` (quality-diversity) or ``"ga"`` (keep the best).
        selection: Parent choice: ``"softmax"``, ``"best"`` or ``"random"``.
        instructions: Task-specific guidance for the mutations, in plain words.
        seed: Seeds the optimizer's draws.
        name: The optimizer's name (``"omega"`` when None).

    Example:

    ```python
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.OMEGA(
            language_model=language_model,
            embedding_model=embedding_model,
        ),
    )
    ```
    """

    CARD = Card(
        prefix="omega_",
        help=(
            "also rewrites the instructions with LM mutations and crossovers (more calls; "
            "best with a strong language_model)."
        ),
        primary="instructions",
        proposes=STEPS,
        grows_prompt=INSTRUCTIONS,
        proposes_for=EDITABLE,
        takes_by_hand=True,
        # With few_shot_learning off (the guide's default) it only rewrites instructions; on
        # label tasks a small model learns the label set from a few demonstrations far better,
        # and RandomFewShot then beats it on the same budget (bench/omega_speed.py).
        defaults={"few_shot_learning": True},
    )
    PARAMETERS = {
        **Optimizer.PARAMETERS,
        "language_model": Flag(
            help="The LM that reasons about mutations and crossovers (default: the program's)."
        ),
        "embedding_model": Flag(
            help="Embeds candidates so DNS can measure how different they are (not used by ga)."
        ),
        "k_nearest_fitter": dns.K_NEAREST_FITTER,
        "mutation_temperature": with_help(
            TEMPERATURE, "Creativity of mutations: lower is conservative, higher exploratory."
        ),
        "crossover_temperature": with_help(
            TEMPERATURE, "Creativity of crossovers: lower is conservative, higher exploratory."
        ),
        "selection_temperature": with_help(
            TEMPERATURE, "Softmax selection of parents: lower is greedier (0.1-0.2 exploits)."
        ),
        "sampling_temperature": with_help(
            TEMPERATURE, "Few-shot sampling: lower favours the examples the program got wrong."
        ),
        # merging_rate × epoch is the crossover probability (capped at 1 by the draw).
        "merging_rate": FloatRange(
            0.0, 1.0, help="Crossover probability per epoch: merging_rate × epoch number."
        ),
        "population_size": dns.POPULATION_SIZE,
        "algorithm": Choice(
            ALGORITHMS,
            help="dns: keep good and novel candidates (quality-diversity); ga: keep the best.",
        ),
        "selection": Choice(
            SELECTIONS,
            help="Parent choice: softmax (by reward, temperature-scaled), best, or random.",
        ),
        "instructions": Flag(help="Task-specific guidance for the mutations, in plain words."),
    }

    @classmethod
    def uses_embedding_model(cls, params: dict[str, Any]) -> bool:
        return params.get("algorithm", "dns") != "ga"  # GA has no competition to embed for

    def __init__(
        self,
        language_model: Any = None,
        embedding_model: Any = None,
        k_nearest_fitter: int = 5,
        distance_function: Any = None,
        mutation_temperature: float = 0.3,
        crossover_temperature: float = 0.3,
        selection_temperature: float = 0.3,
        sampling_temperature: float = 0.3,
        few_shot_learning: bool = False,
        nb_min_examples: int = 1,
        nb_max_examples: int = 3,
        merging_rate: float = 0.02,
        population_size: int = 10,
        algorithm: str = "dns",
        selection: str = "softmax",
        instructions: str | None = None,
        seed: int | None = None,
        name: str | None = None,
    ):
        super().__init__(
            few_shot_learning=few_shot_learning,
            nb_min_examples=nb_min_examples,
            nb_max_examples=nb_max_examples,
            seed=seed,
            name=name,
        )
        check_parameters(
            "OMEGA",
            self.PARAMETERS,
            {
                "k_nearest_fitter": k_nearest_fitter,
                "mutation_temperature": mutation_temperature,
                "crossover_temperature": crossover_temperature,
                "selection_temperature": selection_temperature,
                "sampling_temperature": sampling_temperature,
                "merging_rate": merging_rate,
                "population_size": population_size,
                "algorithm": algorithm,
                "selection": selection,
            },
        )
        if language_model is None:
            raise ValueError(
                "OMEGA needs language_model=... (the LM that reasons about mutations and crossovers)"
            )
        if algorithm == "dns" and embedding_model is None and distance_function is None:
            raise ValueError(
                "OMEGA(algorithm='dns') needs embedding_model=... to measure how different "
                "candidates are (or a custom distance_function, or algorithm='ga' without DNS)"
            )
        if distance_function is not None and not _is_async_callable(distance_function):
            raise TypeError(
                "OMEGA: distance_function must be an async function "
                "`async def distance(c1, c2, embedding_model=None, **kwargs) -> float`, got "
                f"{distance_function!r}"
            )
        self.language_model = language_model
        self.embedding_model = embedding_model
        self.k_nearest_fitter = k_nearest_fitter
        self.distance_function = distance_function
        self.mutation_temperature = float(mutation_temperature)
        self.crossover_temperature = float(crossover_temperature)
        self.selection_temperature = float(selection_temperature)
        self.sampling_temperature = float(sampling_temperature)
        self.merging_rate = float(merging_rate)
        self.population_size = population_size
        self.algorithm = algorithm
        self.selection = selection
        self.instructions = instructions
        self._evolvers: dict[str, VariableEvolver] = {}
        self._embeddings: dict[str, np.ndarray] = {}
        #: {variable name: {canonical inputs: weight}}: how hard each pooled example's input was.
        self.example_weights: dict[str, dict[str, float]] = {}
        self.failed_operations = 0
        #: Mutations/crossovers whose LM call gave a parent's editable value back unchanged.
        self.unchanged_operations = 0
        #: {rule: count} of mutations/crossovers refused before scoring (candidate_checks.py;
        #: ``unchanged`` among them).
        self.refusals: dict[str, int] = {}
        #: Texts sent to the embedding model over this optimizer's life (each value once).
        self.texts_embedded = 0
        #: Measurements of the last competitions (bench/omega.py reads them).
        self.competition_stats: list[dict[str, Any]] = []
        #: The step started at the last batch end (see ``on_batch_end``).
        self._step: asyncio.Future | None = None

    # -- population ------------------------------------------------------------------------
    @staticmethod
    def population(variable: Variable) -> list[dict[str, Any]]:
        """Scored candidates still in the running (not dropped by a competition)."""
        return [
            c
            for c in variable.candidates
            if c.get("reward") is not None and c.get("status") != "dropped"
        ]

    def average_reward(self, variable: Variable) -> float:
        return sel.mean([c["reward"] for c in self.population(variable)])

    # -- hooks -----------------------------------------------------------------------------
    async def on_batch_end(
        self, batch: int, x: Any, y: Any, y_pred: Any, rewards: list[float]
    ) -> None:
        # The previous step's candidate joins the population before anything else is drawn,
        # so every choice is made from the same population, in the same order, as if the steps
        # ran one after the other.
        await self.finish_step()
        await super().on_batch_end(batch, x, y, y_pred, rewards)
        await self.score_pending()  # the seeds, on the first batch
        candidates = [
            v for v in self.trainable_variables if self.evolvable(v) and self.population(v)
        ]
        if not candidates:
            return
        index = sel.select_variable([self.average_reward(v) for v in candidates], self.rng)
        plan = self.plan(candidates[index])
        # The step (its LM call, then scoring the candidate with its values assigned for that
        # task only) runs while fit predicts the next batch: the model's other slot is busy.
        self._step = asyncio.ensure_future(self.run_step(plan, batch_report(x, y, y_pred, rewards)))

    async def finish_step(self) -> None:
        """Wait for the step still running (re-raising what stops fit: an unreachable LM, an
        interrupted run)."""
        step, self._step = self._step, None
        if step is not None:
            await step

    async def settle(self) -> None:
        """A pause after this batch: the step under way finishes first (its LM call is paid)."""
        await self.finish_step()

    async def on_epoch_end(self, epoch: int) -> None:
        await self.finish_step()
        await super().on_epoch_end(epoch)

    async def on_train_end(self) -> None:
        try:
            await self.finish_step()  # a fit stopped mid-epoch
        finally:
            await super().on_train_end()

    async def select(self, epoch: int) -> None:
        """The competition of every variable's population, then assign each variable its best."""
        for variable in self.trainable_variables:
            await self.compete(variable)
        self._prune_embeddings()
        await super().select(epoch)

    # -- few-shot examples -----------------------------------------------------------------
    def _add_example(
        self, variable_name: str, example: dict[str, Any], difficulty: float = 0.0
    ) -> None:
        """As the base, and remember how hard each input was (1 − the reward the program
        earned on it) to weigh the sampling."""
        super()._add_example(variable_name, example, difficulty)
        self._weigh(variable_name, example["inputs"], difficulty)

    def _weigh(self, variable_name: str, inputs: Any, difficulty: float) -> None:
        weights = self.example_weights.setdefault(variable_name, {})
        key = canonical(inputs)
        weights[key] = max(weights.get(key, 0.0), difficulty)

    def sample_examples(self, variable_name: str) -> list[dict[str, Any]] | None:
        """``nb_min..nb_max`` pooled examples, drawn by a softmax at ``sampling_temperature``
        over how hard each input was (the ones the program got wrong teach the most). When the
        output is a label set the draw is stratified: one example of each label (in a seeded
        random order) before any label repeats, each picked by that softmax within its label
        (``label_balance.py``)."""
        pool = self.example_pool.get(variable_name) or []
        if not pool or self.nb_max_examples == 0:
            return None
        weights = self.example_weights.get(variable_name, {})
        difficulty = [weights.get(canonical(e["inputs"]), 0.0) for e in pool]
        labels = self.example_labels(variable_name)
        if labels is None:
            return sel.sample_examples(
                pool,
                difficulty,
                self.nb_min_examples,
                self.nb_max_examples,
                self.sampling_temperature,
                self.rng,
            )
        # A label set: stratified (every label shown before one repeats), and within a label
        # the same difficulty softmax.
        high = min(self.nb_max_examples, len(pool))
        count = self.rng.randint(min(self.nb_min_examples, high), high)

        def pick(remaining: list[int]) -> int:
            return sel.select_index(
                [difficulty[i] for i in remaining],
                "softmax",
                self.sampling_temperature,
                self.rng,
            )

        return [pool[i] for i in label_balance.balanced_indices(labels, count, self.rng, pick)]

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "language_model": serialize(self.language_model),
                "embedding_model": serialize(self.embedding_model),
                "k_nearest_fitter": self.k_nearest_fitter,
                "distance_function": serialize(self.distance_function),
                "mutation_temperature": self.mutation_temperature,
                "crossover_temperature": self.crossover_temperature,
                "selection_temperature": self.selection_temperature,
                "sampling_temperature": self.sampling_temperature,
                "merging_rate": self.merging_rate,
                "population_size": self.population_size,
                "algorithm": self.algorithm,
                "selection": self.selection,
                "instructions": self.instructions,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None) -> OMEGA:
        config = dict(config)
        for key in ("language_model", "embedding_model", "distance_function"):
            config[key] = deserialize(config.get(key), custom_objects)
        return cls(**config)

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["example_weights"] = {k: dict(v) for k, v in self.example_weights.items()}
        state["failed_operations"] = self.failed_operations
        state["refusals"] = dict(self.refusals)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.example_weights = {k: dict(v) for k, v in (state.get("example_weights") or {}).items()}
        self.failed_operations = int(state.get("failed_operations", 0))
        self.refusals = {str(k): int(v) for k, v in (state.get("refusals") or {}).items()}


__all__ = ["ALGORITHMS", "FROZEN_FIELDS", "OMEGA", "SELECTIONS", "TEMPERATURES"]
