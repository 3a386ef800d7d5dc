"""What a tool that offers an optimizer needs to know about it: its card.

Why: a tool around the engine (the dashboard's launch form, its forecast, its advice) must not
know optimizers by name, or adding one means editing every place that does. Each optimizer
class declares a :class:`Card` (``Optimizer.CARD``) beside its ``PARAMETERS``: how its form
fields are prefixed and which one is shown first, when to pick it, how it proposes candidates
(what the forecast counts), what its candidates add to a prompt, which models it calls and
what it takes while it runs. The tool iterates the optimizers it offers and reads their cards
(``catalog.card_of`` finds one by the class name).

Example:

```python
class MyOptimizer(Optimizer):
    CARD = Card(prefix="my_", help="tries one thing per epoch.", primary="nb_max_examples",
                proposes=ONCE)
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: How an optimizer proposes candidates (the forecast's rule for each):
#: ``DRAWS``: ``nb_candidates`` example sets drawn at each epoch end (RandomFewShot);
#: ``ONCE``: one value built from the training data at the first epoch end, the same value
#: again later (never scored twice: at most one epoch starts under it);
#: ``STEPS``: one LM call per training batch, its candidate scored at once (OMEGA).
DRAWS, ONCE, STEPS = "draws", "once", "steps"
PROPOSALS = (DRAWS, ONCE, STEPS)

#: What a candidate adds to each prompt (the forecast sizes its calls by it):
#: ``EXAMPLES``: nb_min..nb_max examples; ``NEAREST``: ``k`` retrieved examples;
#: ``INSTRUCTIONS``: rewritten instructions; ``NOTHING``: the prompt stays the seed's.
EXAMPLES, NEAREST, INSTRUCTIONS, NOTHING = "examples", "nearest", "instructions", "nothing"

#: When an optimizer has something to propose for a variable's value:
#: ``HAS_EXAMPLES``: the value holds examples; ``EDITABLE``: it holds a field its LM may write.
HAS_EXAMPLES, EDITABLE = "examples", "editable"


@dataclass(frozen=True)
class Card:
    """An optimizer's card (see the module docstring).

    Args:
        prefix: its parameters' form field prefix (``rfs_`` → ``rfs_nb_max_examples``).
        help: when to pick it, in one sentence (after its name).
        primary: the parameter shown with the basics (the rest under advanced settings).
        proposes: :data:`DRAWS`, :data:`ONCE` or :data:`STEPS`.
        grows_prompt: what its candidates add to each prompt (:data:`EXAMPLES`, ...).
        proposes_for: :data:`HAS_EXAMPLES` or :data:`EDITABLE`.
        embeds_pool: its embedding model embeds a pool of training examples, then each input
            predicted with it (embedding requests the forecast counts).
        takes_by_hand: a person may add a candidate to its population while it runs.
        label_tasks: the optimizer to recommend when the program answers a label field.
        cross_fits: its candidates are also judged on the training rows, each predicted
            without itself (so every labelled row is evidence, not the validation rows alone).
        defaults: where a tool's default should differ from the constructor's, e.g. OMEGA's
            ``few_shot_learning`` (the reason in the optimizer's docstring).
        epochs: epochs that suffice (None: the tool's own default).
    """

    prefix: str
    help: str
    primary: str
    proposes: str
    grows_prompt: str = NOTHING
    proposes_for: str = HAS_EXAMPLES
    embeds_pool: bool = False
    takes_by_hand: bool = False
    label_tasks: bool = False
    cross_fits: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    epochs: int | None = None

    def __post_init__(self) -> None:
        if self.proposes not in PROPOSALS:
            raise ValueError(f"Card.proposes must be one of {PROPOSALS}, got {self.proposes!r}")


__all__ = [
    "DRAWS",
    "EDITABLE",
    "EXAMPLES",
    "HAS_EXAMPLES",
    "INSTRUCTIONS",
    "NEAREST",
    "NOTHING",
    "ONCE",
    "PROPOSALS",
    "STEPS",
    "Card",
]
