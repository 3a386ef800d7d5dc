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
  fresh examples the step still proposes the parent's few-shot variant.
- ``on_epoch_end``: the competition. ``algorithm="dns"``: Dominated Novelty Search over each
  variable's population (``dns.py``); distances are cosine distances between candidate
  embeddings, each distinct value embedded once (cached by content hash) and all pairs computed
  in one numpy operation, or a custom async ``distance_function``. ``algorithm="ga"``: the top
  ``population_size`` by reward. Every competitor is emitted as ``kept`` or ``dropped`` (with
  ``competition_epoch`` and, when DNS embedded it, a bounded ``embedding`` for the dashboard's
  population map); each variable is then assigned its best candidate.
- ``on_train_end``: the best candidates are assigned and emitted as ``best``.

Construction refuses the guide's pitfalls with clear errors (see ``__init__``).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import time
from typing import Any

import jsonschema
import numpy as np

from training.engine.bounds import Choice, Flag, FloatRange, check_parameters, with_help
from training.engine.language_models.tracing import trace_context
from training.engine.optimizers import candidate_checks, dns, label_balance
from training.engine.optimizers import selection as sel
from training.engine.optimizers.card import EDITABLE, INSTRUCTIONS, STEPS, Card
from training.engine.optimizers.mutation import (
    FROZEN_FIELDS,
    VariableEvolver,
    batch_report,
    canonical,
)
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.utils.projection import compact_embedding
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
#: Characters of a refused text carried by its ``candidate_refused`` event.
REFUSED_TEXT_CHARS = 200


def _is_async_callable(function: Any) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def embedding_text(value: dict[str, Any]) -> str:
    """What DNS embeds of a candidate: its canonical JSON, a NearestFewShot pool summarised
    (its base64 vectors say nothing a text embedding can read, and would fill its window)."""
    retrieval = value.get("retrieval")
    if isinstance(retrieval, dict) and retrieval.get("pool"):
        pool = retrieval["pool"]
        value = {**value, "retrieval": {"k": retrieval.get("k"), "pool_size": len(pool)}}
    return canonical(value)


def _embedding_key(value: Any) -> str:
    """The embedding cache's key for a candidate value (its canonical JSON's digest)."""
    return hashlib.sha1(canonical(value).encode()).hexdigest()


@register_synalinks_serializable(package="synalinks")
class OMEGA(Optimizer):
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

    def evolver(self, variable: Variable) -> VariableEvolver:
        found = self._evolvers.get(variable.name)
        if found is None:
            found = VariableEvolver(
                variable,
                self.language_model,
                self.mutation_temperature,
                self.crossover_temperature,
                self.instructions,
            )
            self._evolvers[variable.name] = found
        return found

    def evolvable(self, variable: Variable) -> bool:
        """Can this variable change at all: editable fields, or examples to resample."""
        if self.evolver(variable).editable:
            return True
        return self.few_shot_learning and "examples" in variable.value

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

    async def evolve(self, variable: Variable, batch: list[dict]) -> dict[str, Any] | None:
        """Make, score and return one new candidate for ``variable`` (None when skipped)."""
        return await self.run_step(self.plan(variable), batch)

    def plan(self, variable: Variable) -> dict[str, Any]:
        """Every random choice of one step, in this order: crossover or mutation, the
        parent(s) (``selection``), the fresh examples (``few_shot_learning``)."""
        population = self.population(variable)
        rewards = [c["reward"] for c in population]
        operation = "mutation"
        if len(population) >= 2 and self.rng.random() < sel.crossover_probability(
            self.merging_rate, self.epoch
        ):
            operation = "crossover"
        if operation == "crossover":
            picks = sel.select_indices(
                rewards, 2, self.selection, self.selection_temperature, self.rng
            )
            parents = [population[i] for i in picks]
        else:
            parents = [
                population[
                    sel.select_index(rewards, self.selection, self.selection_temperature, self.rng)
                ]
            ]
        examples = None
        if self.few_shot_learning and "examples" in parents[0]["value"]:
            examples = self.sample_examples(variable.name)
        return {
            "variable": variable,
            "operation": operation,
            "parents": parents,
            "population": population,
            "examples": examples,
        }

    async def run_step(self, plan: dict[str, Any], batch: list[dict]) -> dict[str, Any] | None:
        """The LM call of a planned step, then its candidate, scored (None when skipped)."""
        variable, operation, parents = plan["variable"], plan["operation"], plan["parents"]
        evolver = self.evolver(variable)
        value = dict(parents[0]["value"])
        if evolver.editable:
            try:
                # its LM calls (traced as mutation/crossover) name the candidate they start
                # from: the parent (a crossover's first)
                with trace_context(candidate_id=parents[0]["id"]):
                    if operation == "crossover":
                        a, b = parents
                        edited = await evolver.crossover(
                            a["value"], a["reward"], b["value"], b["reward"], batch
                        )
                    else:
                        edited = await evolver.mutate(
                            parents[0]["value"], parents[0]["reward"], batch
                        )
            except Exception as exc:  # a failed LM call never kills fit
                await self._failed(variable, operation, exc)
                return None
            value.update(edited)
            refused = candidate_checks.refusal(
                evolver.editable_part(value),
                [evolver.editable_part(p["value"]) for p in parents],
                self.label_set(variable),
            )
            if refused is not None:
                # Junk text (or a parent's, unchanged: a small model often gives it back) is
                # never scored. Only new examples can still make a candidate, and then it is
                # the parent's few-shot variant.
                await self._refused(variable, operation, parents, value, refused)
                if plan["examples"] is None:
                    return None
                operation, parents = "few_shot", parents[:1]
                value = dict(parents[0]["value"])
        elif operation == "mutation":
            operation = "few_shot"
        if plan["examples"] is not None:
            value["examples"] = plan["examples"]
        value = variable.with_pinned(value)  # before the duplicate check below
        try:
            jsonschema.validate(value, variable.schema or {})
        except jsonschema.ValidationError as exc:
            await self._failed(
                variable, operation, f"the new value does not fit the schema: {exc.message}"
            )
            return None
        if any(canonical(c["value"]) == canonical(value) for c in plan["population"]):
            logger.debug(
                "OMEGA: %s of %s gave a value already in the population", operation, variable.name
            )
            return None
        # A value dropped by an earlier competition may come back and compete again; scoring
        # it costs no prediction (``Optimizer.score`` remembers every assignment's reward).
        candidate = self.add_candidate(
            variable, value, operation, parent_ids=[p["id"] for p in parents]
        )
        await self.score_candidates([(variable, candidate)])
        return candidate

    def label_set(self, variable: Variable) -> list[str] | None:
        """The labels of the output's label fields of ``variable``'s module (None: none)."""
        fields = label_balance.output_labels(self.program, variable.name)
        return [label for labels in fields.values() for label in labels] or None

    async def _refused(
        self,
        variable: Variable,
        operation: str,
        parents: list[dict[str, Any]],
        value: dict[str, Any],
        refused: candidate_checks.Refusal,
    ) -> None:
        """Count a refused mutation/crossover (``refusals`` by rule) and emit a
        ``candidate_refused`` event: the rule, its reason, the field and a clipped text."""
        self.refusals[refused.rule] = self.refusals.get(refused.rule, 0) + 1
        if refused.rule == "unchanged":
            self.unchanged_operations += 1
        text = value.get(refused.field)
        logger.debug("OMEGA: %s of %s refused: %s", operation, variable.name, refused.reason)
        await self.emit(
            {
                "type": "candidate_refused",
                "epoch": self.epoch,
                "variable": variable.name,
                "operation": operation,
                "parent_ids": [p["id"] for p in parents],
                **refused.to_dict(),
                "text": text[:REFUSED_TEXT_CHARS] if isinstance(text, str) else None,
            }
        )

    async def _failed(self, variable: Variable, operation: str, error: Any) -> None:
        self.failed_operations += 1
        message = (
            f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
        )
        logger.warning("OMEGA: %s of variable %r skipped: %s", operation, variable.name, message)
        await self.emit(
            {
                "type": "optimizer_error",
                "epoch": self.epoch,
                "variable": variable.name,
                "operation": operation,
                "error": message[:500],
            }
        )

    async def select(self, epoch: int) -> None:
        """The competition of every variable's population, then assign each variable its best."""
        for variable in self.trainable_variables:
            await self.compete(variable)
        self._prune_embeddings()
        await super().select(epoch)

    def _prune_embeddings(self) -> None:
        """Forget the vectors of dropped candidates (the cache stays population-sized)."""
        alive = {
            _embedding_key(c["value"])
            for variable in self.trainable_variables
            for c in self.population(variable)
        }
        self._embeddings = {k: v for k, v in self._embeddings.items() if k in alive}

    # -- competition -----------------------------------------------------------------------
    async def compete(self, variable: Variable) -> list[dict[str, Any]]:
        """Run DNS (or GA elitism) on ``variable``'s population; emit kept/dropped; return kept."""
        population = self.population(variable)
        if not population:
            return []
        rewards = [c["reward"] for c in population]
        started = time.perf_counter()
        texts_before = self.texts_embedded
        scores: np.ndarray | None = None
        if self.algorithm == "dns" and len(population) > 1:
            try:
                distances = await self.distance_matrix([c["value"] for c in population], rewards)
                kept, scores = dns.dns_select(
                    rewards, distances, self.k_nearest_fitter, self.population_size
                )
            except Exception as exc:  # no distances: keep the fittest rather than stop fit
                await self._failed(variable, "competition", exc)
                kept = dns.elitism(rewards, self.population_size)
        else:
            kept = dns.elitism(rewards, self.population_size)
        self.competition_stats.append(
            {
                "epoch": self.epoch,
                "variable": variable.name,
                "population": len(population),
                "kept": len(kept),
                "embedding_texts": self.texts_embedded - texts_before,
                "seconds": time.perf_counter() - started,
            }
        )
        kept_set = set(kept)
        for index, candidate in enumerate(population):
            candidate["novelty"] = None if scores is None else round(float(scores[index]), 6)
            candidate["status"] = "kept" if index in kept_set else "dropped"
            await self.emit_candidate(variable, candidate, **self._map_fields(candidate))
        return [population[i] for i in kept]

    def _map_fields(self, candidate: dict[str, Any]) -> dict[str, Any]:
        """What a population map needs beyond the candidate: the epoch of this competition
        and the candidate's embedding when DNS computed one (bounded: ``compact_embedding``).
        Never stored on the candidate itself (it is saved with the program)."""
        fields: dict[str, Any] = {"competition_epoch": self.epoch}
        vector = self._embeddings.get(_embedding_key(candidate["value"]))
        if vector is not None:
            fields["embedding"] = compact_embedding(vector)
        return fields

    async def embed(self, values: list[dict[str, Any]]) -> np.ndarray:
        """One vector per value; each distinct value is embedded once for the whole fit."""
        keys = [_embedding_key(v) for v in values]
        missing: dict[str, str] = {}
        for key, value in zip(keys, values, strict=True):
            if key not in self._embeddings and key not in missing:
                missing[key] = embedding_text(value)
        if missing:
            vectors = await self.embedding_model(list(missing.values()))
            if len(vectors) != len(missing):
                raise RuntimeError(
                    f"embedding model returned {len(vectors)} vectors for {len(missing)} texts"
                )
            self.texts_embedded += len(missing)
            for key, vector in zip(missing, vectors, strict=True):
                self._embeddings[key] = np.asarray(vector, dtype=float)
        return np.stack([self._embeddings[key] for key in keys])

    async def distance_matrix(
        self, values: list[dict[str, Any]], rewards: list[float]
    ) -> np.ndarray:
        """N×N distances: cosine over embeddings (one numpy op), or the custom function on the
        pairs DNS reads (those with different rewards; the function is taken as symmetric)."""
        if self.distance_function is None:
            return dns.cosine_distance_matrix(await self.embed(values))
        count = len(values)
        pairs = [
            (i, j) for i in range(count) for j in range(i + 1, count) if rewards[i] != rewards[j]
        ]
        results = await asyncio.gather(
            *(
                self.distance_function(values[i], values[j], embedding_model=self.embedding_model)
                for i, j in pairs
            )
        )
        distances = np.full((count, count), np.nan)
        np.fill_diagonal(distances, 0.0)
        for (i, j), value in zip(pairs, results, strict=True):
            distances[i, j] = distances[j, i] = float(value)
        return distances

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
