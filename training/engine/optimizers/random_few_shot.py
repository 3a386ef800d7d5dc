"""RandomFewShot: sample few-shot examples from the training data, keep what scores best.

Examples only ever show correct outputs: the ground truth, or a prediction that earned full
reward (see ``Optimizer.collect_examples``). Each epoch it proposes ``nb_candidates`` new
example sets (for every variable at once), scores them on the validation data, and keeps the
champion (``Optimizer.champion``: the starting variables unless a candidate beats them by one
validation example's worth), so the validation reward never ends below where it began. It makes no LM call of its own.

When the Generator's output is a label set (a ``Literal`` field), each draw is stratified: it
shows as many different labels as it has examples (``label_balance.py``), seeded like the
rest, so a skewed training set does not teach a small model to answer its majority label.
"""

from __future__ import annotations

from typing import Any

from training.engine.bounds import MAX_COUNT, Flag, IntRange, check_parameters
from training.engine.optimizers.card import DRAWS, EXAMPLES, Card
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import register_synalinks_serializable


@register_synalinks_serializable(package="synalinks")
class RandomFewShot(Optimizer):
    """Proposes sets of few-shot examples drawn from the training data and keeps the best.

    ``few_shot_learning`` is accepted for parity with the guide; sampling examples is what this
    optimizer does, so it always does it. On a label set (a ``Literal`` output field) the draws
    cover the labels (``label_balance``).

    Args:
        few_shot_learning: Accepted for parity with the guide; always on.
        nb_min_examples: Fewest examples in a proposed set.
        nb_max_examples: Most examples in a proposed set.
        nb_candidates: New example sets proposed (and scored) after each epoch.
        seed: Seeds the draws, so a seed fixes which examples are proposed.
        name: The optimizer's name (``"randomfewshot"`` when None).

    Example:

    ```python
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(
            nb_min_examples=1,
            nb_max_examples=3,
        ),
    )
    ```
    """

    PARAMETERS = {
        **Optimizer.PARAMETERS,
        # Accepted for parity with the guide; this optimizer always samples examples.
        "few_shot_learning": Flag(
            help="Always on: sampling few-shot examples is what RandomFewShot does."
        ),
        "nb_candidates": IntRange(
            1, MAX_COUNT, help="New example sets proposed (and scored) after each epoch."
        ),
    }
    #: Parameters whose value does not change what this optimizer does (forms show them fixed).
    FIXED = {"few_shot_learning": True}
    CARD = Card(
        prefix="rfs_",
        help="samples a few training examples into the prompt (no extra LM calls).",
        primary="nb_max_examples",
        proposes=DRAWS,
        grows_prompt=EXAMPLES,
        takes_by_hand=True,
    )

    def __init__(
        self,
        few_shot_learning: bool = False,
        nb_min_examples: int = 1,
        nb_max_examples: int = 3,
        nb_candidates: int = 1,
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
        check_parameters("RandomFewShot", self.PARAMETERS, {"nb_candidates": nb_candidates})
        self.nb_candidates = int(nb_candidates)

    async def propose(self, epoch: int) -> list[list[tuple[Any, dict[str, Any]]]]:
        groups = []
        for _ in range(self.nb_candidates):
            candidate_id = self.new_candidate_id()
            group = []
            for variable in self.trainable_variables:
                if "examples" not in variable.value:
                    continue
                examples = self.sample_examples(variable.name)
                if examples is None:
                    continue
                value = dict(variable.value)
                value["examples"] = examples
                candidate = self.add_few_shot_child(variable, value, candidate_id=candidate_id)
                group.append((variable, candidate))
            if group:
                groups.append(group)
        return groups

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["nb_candidates"] = self.nb_candidates
        return config
