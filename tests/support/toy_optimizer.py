"""A toy optimizer plug-in: what adding an optimizer to the engine and the dashboard takes.

``Shuffler`` is a complete optimizer in one module: a subclass of the engine's
``Optimizer`` with a ``CARD`` and one bounded parameter, registered for saving as the
engine's own are. Listing ``"tests.support.toy_optimizer.Shuffler"`` in
``TRAINBOARD_OPTIMIZERS`` is all the dashboard needs to offer it (the launch form, the
run's configuration, the forecast, the run page);
tests/training/runs/test_optimizer_plugin.py checks that nothing else has to change.

At each epoch end it proposes one candidate per variable holding examples: the latest
``nb_examples`` examples it pooled from the training batches, newest first. It makes no LM
call of its own.
"""

from __future__ import annotations

from typing import Any

from training.engine.bounds import IntRange, check_parameters
from training.engine.optimizers.card import DRAWS, EXAMPLES, Card
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="trainboard")
class Shuffler(Optimizer):
    """Proposes the latest pooled training examples, newest first, once per epoch.

    Args:
        nb_examples: Examples in the proposed set.
        seed: Seeds the optimizer's draws (it draws nothing; kept for the engine's API).
        name: The optimizer's name (``"shuffler"`` when None).
    """

    PARAMETERS = {
        "nb_examples": IntRange(1, 8, help="Latest training examples proposed, newest first."),
    }
    CARD = Card(
        prefix="shuf_",
        help="proposes the latest training examples, newest first (a test's toy).",
        primary="nb_examples",
        proposes=DRAWS,
        grows_prompt=EXAMPLES,
    )

    def __init__(self, nb_examples: int = 2, seed: int | None = None, name: str | None = None):
        check_parameters("Shuffler", self.PARAMETERS, {"nb_examples": nb_examples})
        super().__init__(
            few_shot_learning=True,
            nb_min_examples=nb_examples,
            nb_max_examples=nb_examples,
            seed=seed,
            name=name,
        )
        self.nb_examples = int(nb_examples)

    async def propose(self, epoch: int) -> list[list[tuple[Any, dict[str, Any]]]]:
        candidate_id = self.new_candidate_id()
        group = []
        for variable in self.trainable_variables:
            pool = self.example_pool.get(variable.name) or []
            if "examples" not in variable.value or not pool:
                continue
            parent = self.champion(variable)
            value = {**variable.value, "examples": list(reversed(pool[-self.nb_examples :]))}
            candidate = self.add_candidate(
                variable,
                value,
                "few_shot",
                parent_ids=[parent["id"]] if parent else [],
                candidate_id=candidate_id,
            )
            group.append((variable, candidate))
        return [group] if group else []

    def get_config(self) -> dict[str, Any]:
        return {"nb_examples": self.nb_examples, "seed": self.seed, "name": self.name}
