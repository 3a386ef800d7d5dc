"""Which candidate each trainable variable takes, and the events that say so.

:class:`Champions` is the part of the :class:`~training.engine.optimizers.optimizer.Optimizer`
base that applies the one selection rule (``selection.champion``: the seed unless a candidate
beats it beyond noise) at each epoch end (``select``), emits one ``selection`` event per
variable, and with a selection split scores the top validation candidates on it
(``choose_on_selection``, ``final_selection``).
"""

from __future__ import annotations

from typing import Any

from training.engine.language_models.tracing import trace_context
from training.engine.optimizers import final_selection
from training.engine.optimizers import selection as sel
from training.engine.variables import Variable


class Champions:
    """Mixin of :class:`~training.engine.optimizers.optimizer.Optimizer`: it reads the
    optimizer's ``trainable_variables``, ``tie_margin``, ``epoch`` and selection scorer and
    emits through its ``emit`` / ``emit_candidate``."""

    def champion(self, variable: Variable) -> dict[str, Any] | None:
        """The candidate ``variable`` takes: the seed unless a candidate beats it by the tie
        margin (``selection.champion``)."""
        return sel.champion(variable.candidates, self.tie_margin)

    def beating_seed(self) -> dict[str, tuple[int, int]]:
        """{variable name: (candidates scored besides the seed, how many beat the seed)}."""
        return {
            v.name: sel.count_beating(v.candidates, self.tie_margin)
            for v in self.trainable_variables
        }

    @property
    def kept_seed(self) -> bool:
        """Whether every trainable variable holds its seed's value (no candidate replaced it)."""
        for variable in self.trainable_variables:
            seed = next((c for c in variable.candidates if c.get("operation") == "seed"), None)
            if seed is not None and variable.value != seed["value"]:
                return False
        return True

    @property
    def candidates_beating_seed(self) -> int:
        """How many candidates (all variables) beat their seed beyond noise (``selection``)."""
        return sum(beating for _, beating in self.beating_seed().values())

    async def select(self, epoch: int) -> None:
        """Assign each variable its champion (see ``champion``), then emit ``selection``."""
        for variable in self.trainable_variables:
            best = self.champion(variable)
            if best is not None and best["value"] != variable.value:
                variable.assign(best["value"])
        await self.emit_selection()

    async def emit_selection(self) -> None:
        """One ``selection`` event per variable: candidates scored besides the seed, how many
        beat it (``beat_seed``), the margin, the seed's and the champion's rewards, and the
        best-scored other candidate's gain over the seed (``best_gain``: its paired interval,
        the evidence the rule weighed; None when there is none)."""
        counts = self.beating_seed()
        for variable in self.trainable_variables:
            scored, beating = counts[variable.name]
            seed = next((c for c in variable.candidates if c.get("operation") == "seed"), None)
            best = self.champion(variable)
            others = [
                c
                for c in variable.candidates
                if c is not seed and c.get("reward") is not None and c.get("gain")
            ]
            top = max(others, key=lambda c: c["reward"], default=None)
            await self.emit(
                {
                    "type": "selection",
                    "epoch": self.epoch,
                    "variable": variable.name,
                    "candidates": scored,
                    "beat_seed": beating,
                    "margin": round(self.tie_margin, 6),
                    "seed_reward": None if seed is None else seed.get("reward"),
                    "champion_id": None if best is None else best["id"],
                    "champion_reward": None if best is None else best["reward"],
                    "best_gain": None if top is None else dict(top["gain"], id=top["id"]),
                }
            )

    async def choose_on_selection(
        self, variable: Variable, validation_best: dict[str, Any]
    ) -> dict[str, Any]:
        """Score ``variable``'s top validation candidates on the selection split (the other
        variables at their champions) and return the best there (``final_selection``); emit
        each contender's ``selection_reward`` and one ``final_selection`` event."""
        scorer = self._selection_scorer
        contenders = final_selection.contenders(variable.candidates)
        for candidate in contenders:
            if candidate.get("selection_reward") is not None:
                continue
            with trace_context(candidate_id=candidate["id"]):
                details = await scorer.score_examples({variable.name: candidate["value"]})
            candidate["selection_reward"] = details.reward
            candidate["selection_example_rewards"] = details.event_fields()["example_rewards"]
            await self.emit_candidate(
                variable,
                candidate,
                selection_reward=details.reward,
                **details.event_fields(prefix="selection_"),
            )
        margin = sel.tie_margin(getattr(scorer, "examples", None))
        chosen = final_selection.choose(contenders, margin) or validation_best
        await self.emit(
            {
                "type": "final_selection",
                "epoch": self.epoch,
                "variable": variable.name,
                "top_k": final_selection.TOP_K,
                "contenders": [c["id"] for c in contenders],
                "selection_samples": getattr(scorer, "examples", None),
                "margin": round(margin, 6),
                "validation_best_id": validation_best["id"],
                "chosen_id": chosen["id"],
                "chosen_reward": chosen.get("reward"),
                "chosen_selection_reward": chosen.get("selection_reward"),
            }
        )
        return chosen
