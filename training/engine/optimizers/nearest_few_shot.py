"""NearestFewShot: retrieve, for each input, the training examples most like it (KNNFewShot).

Why: a small model learns formats and label sets from its examples, and the examples that
help most are the ones nearest to the input (DSPy's KNNFewShot). RandomFewShot shows every
input the same few examples; this optimizer gives each Generator's ``state`` a ``retrieval``
pool — the training examples with their embeddings (``modules/example_retrieval.py``) — so
that at predict time the Generator puts the ``k`` pool examples nearest to the input in its
prompt. Its instructions (written by hand or by OMEGA) and its fixed examples stay as they are.

How a fit goes (the :class:`Optimizer` hooks):

- every batch: the ground-truth examples are pooled (``collect_examples``, one per input);
- at each epoch end: the pool (at most ``pool_size`` examples, drawn label by label on a label
  set, then sorted, so the same data give the same pool) is embedded — each text once per
  fit, in one batched call of the embedding model — and proposed as a candidate for every
  Generator state; it is scored on the validation data with each row's own example left out
  (``leaving_out_own_rows``), and kept only if it beats the starting value beyond noise
  (``Optimizer.champion``), like every optimizer here. A later epoch with the same pool
  proposes the same value, whose score is remembered (no prediction).

Cost: no LM call of its own. Embedding calls: the pool once per fit (batched), then one per
distinct input predicted with a pool (cached by the Generator). ``forecast.count_calls``
counts both.
"""

from __future__ import annotations

import copy
from typing import Any

from training.engine.bounds import Flag, check_parameters
from training.engine.modules import example_retrieval as retrieval
from training.engine.optimizers import label_balance
from training.engine.optimizers.card import NEAREST, ONCE, Card
from training.engine.optimizers.mutation import canonical
from training.engine.optimizers.optimizer import Optimizer
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.variables import Variable

#: How many nearest examples a prompt shows unless told otherwise.
DEFAULT_K = 4


@register_synalinks_serializable(package="synalinks")
class NearestFewShot(Optimizer):
    """``NearestFewShot(embedding_model=em, k=4, pool_size=256, vote=True)``.

    Args:
        embedding_model: embeds the pool's inputs and, at predict time, each input (the run's
            embedding model; the dashboard's default is ``local/minilm``). A Generator with
            its own ``embedding_model`` keeps it (pool and queries must share one model).
        k: nearest examples put in each prompt (:data:`example_retrieval.K`).
        pool_size: most training examples kept (:data:`example_retrieval.POOL_SIZE`).
        vote: also say, in the system message, which answer the ``k`` neighbours gave most
            (a small model copies a stated answer more reliably than it weighs examples).
        seed: seeds which examples stay when there are more than ``pool_size``.
        name: the optimizer's name.

    Example:

    ```python
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["label"]),
        optimizer=synalinks.optimizers.NearestFewShot(
            embedding_model=synalinks.EmbeddingModel(model="local/minilm"), k=4
        ),
    )
    await program.fit(x_train, y_train, validation_split=0.25, epochs=1)
    ```
    """

    CARD = Card(
        prefix="nfs_",
        help=(
            "puts in each prompt the training examples most like the input, found by an "
            "embedding model (no extra LM calls)."
        ),
        primary="k",
        proposes=ONCE,
        grows_prompt=NEAREST,
        embeds_pool=True,
    )
    PARAMETERS = {
        "embedding_model": Flag(
            help="Embeds training inputs and each new input to find the nearest examples."
        ),
        "k": retrieval.K,
        "pool_size": retrieval.POOL_SIZE,
        "vote": Flag(help="Also tell the LM which answer the nearest examples gave most."),
    }

    def __init__(
        self,
        embedding_model: Any = None,
        k: int = DEFAULT_K,
        pool_size: int = 256,
        vote: bool = True,
        seed: int | None = None,
        name: str | None = None,
    ):
        super().__init__(few_shot_learning=True, seed=seed, name=name)
        check_parameters("NearestFewShot", self.PARAMETERS, {"k": k, "pool_size": pool_size})
        if embedding_model is None:
            raise ValueError(
                "NearestFewShot needs embedding_model=... to find the training examples "
                'nearest to each input (e.g. EmbeddingModel(model="local/minilm"))'
            )
        self.k = int(k)
        self.vote = bool(vote)
        self._init_pool(embedding_model, pool_size)

    def _init_pool(self, embedding_model: Any, pool_size: int) -> None:
        """The pool's settings and the fit's embeddings (shared with ``CalibratedLabels``)."""
        self.embedding_model = embedding_model
        self.pool_size = int(pool_size)
        #: {(embedding model, text): encoded vector}: each text embedded once per fit.
        self._vectors: dict[tuple[str, str], str] = {}
        #: Texts sent to the embedding model (the pool's), over this optimizer's life.
        self.texts_embedded = 0
        #: Embedding requests made for the pool (one per batch of the embedding model).
        self.embedding_requests = 0

    # -- wiring ----------------------------------------------------------------------------
    def attach(self, program: Any, callbacks: Any, scorer: Any, seed: int | None = None) -> None:
        super().attach(program, callbacks, scorer, seed)
        self._vectors = {}  # a new fit embeds its own data (the model may have changed)

    def retrievers(self) -> list[tuple[Variable, Any]]:
        """(variable, its Generator) for every trained state that can hold a pool."""
        found = []
        for variable in self.trainable_variables:
            module = label_balance.module_of(self.program, variable.name)
            if module is not None and hasattr(module, "retrieve") and "examples" in variable.value:
                found.append((variable, module))
        return found

    def model_of(self, module: Any) -> Any:
        """The embedding model of ``module``'s pool: its own, else this optimizer's (set on it
        so predictions after fit, and the saved program, use the same one)."""
        if getattr(module, "embedding_model", None) is None:
            module.embedding_model = self.embedding_model
        return module.embedding_model

    # -- candidates ------------------------------------------------------------------------
    async def propose(self, epoch: int) -> list[list[tuple[Variable, dict[str, Any]]]]:
        candidate_id = self.new_candidate_id()
        group = []
        for variable, module in self.retrievers():
            examples = self.pool_examples(variable.name)
            if not examples:
                continue
            model = self.model_of(module)
            pool = await self.embedded(model, examples)
            value = copy.deepcopy(variable.value)
            value["retrieval"] = {
                "k": self.k,
                "embedding_model": str(getattr(model, "model", "")),
                "vote": self.vote,
                "pool": pool,
            }
            if value == variable.value or any(c["value"] == value for c in variable.candidates):
                continue  # the same pool again (a later epoch): nothing new to score
            candidate = self.add_few_shot_child(variable, value, candidate_id=candidate_id)
            group.append((variable, candidate))
        return [group] if group else []

    def pool_examples(self, variable_name: str) -> list[dict[str, Any]]:
        """The pooled examples kept for retrieval: all of them up to ``pool_size``, else a
        seeded draw (label by label on a label set); sorted by input, so the same data give
        the same pool whatever order the batches came in."""
        pool = self.example_pool.get(variable_name) or []
        if len(pool) > self.pool_size:
            labels = self.example_labels(variable_name)
            if labels is None:
                pool = self.rng.sample(pool, self.pool_size)
            else:
                indices = label_balance.balanced_indices(labels, self.pool_size, self.rng)
                pool = [pool[i] for i in indices]
        return sorted(
            ({"inputs": e["inputs"], "outputs": e["outputs"]} for e in pool),
            key=lambda e: canonical(e["inputs"]),
        )

    async def embedded(self, model: Any, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``examples`` with their ``vector``: the texts not embedded yet in this fit go to
        the embedding model in one call (it batches them)."""
        name = str(getattr(model, "model", repr(model)))
        texts = [retrieval.retrieval_text(e["inputs"]) for e in examples]
        missing = list(dict.fromkeys(t for t in texts if (name, t) not in self._vectors))
        if missing:
            vectors = await model(missing)
            if len(vectors) != len(missing):
                raise retrieval.RetrievalError(
                    f"embedding model returned {len(vectors)} vectors for {len(missing)} texts"
                )
            self.texts_embedded += len(missing)
            batch = int(getattr(model, "batch_size", len(missing)) or len(missing))
            self.embedding_requests += -(-len(missing) // batch)
            for text, vector in zip(missing, vectors, strict=True):
                self._vectors[(name, text)] = retrieval.encode_vector(vector)
        return [
            {**example, "vector": self._vectors[(name, text)]}
            for example, text in zip(examples, texts, strict=True)
        ]

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {
            "embedding_model": serialize(self.embedding_model),
            "k": self.k,
            "pool_size": self.pool_size,
            "vote": self.vote,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(
        cls, config: dict[str, Any], custom_objects: dict | None = None
    ) -> NearestFewShot:
        config = dict(config)
        config["embedding_model"] = deserialize(config.get("embedding_model"), custom_objects)
        return cls(**config)


__all__ = ["NearestFewShot"]
