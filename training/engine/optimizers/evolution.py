"""One evolution step of OMEGA: which operation on which parents, the LM call that makes the
new value, the checks it must pass, and what a refused or failed operation emits.

:class:`Evolution` is a mixin of :class:`~training.engine.optimizers.omega.OMEGA`: ``plan``
makes every random choice of a step (crossover or mutation, the parents, fresh examples),
``run_step`` makes and scores its candidate; a text the checks refuse
(``candidate_checks``) is never scored and says why in a ``candidate_refused`` event, a
failed LM call in an ``optimizer_error`` event, and fit goes on.
"""

from __future__ import annotations

import logging
from typing import Any

import jsonschema

from training.engine import schema_validation
from training.engine.language_models.tracing import trace_context
from training.engine.optimizers import candidate_checks, label_balance
from training.engine.optimizers import selection as sel
from training.engine.optimizers.mutation import VariableEvolver, canonical
from training.engine.variables import Variable

# OMEGA's messages, logged under its name.
logger = logging.getLogger("training.engine.optimizers.omega")

#: Characters of a refused text carried by its ``candidate_refused`` event.
REFUSED_TEXT_CHARS = 200


class Evolution:
    """Mixin of OMEGA: it reads the optimizer's population, settings, random generator and
    language model, and emits through its ``emit``."""

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
            schema_validation.validate(value, variable.schema or {})
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
