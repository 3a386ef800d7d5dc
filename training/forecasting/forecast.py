"""Forecast of a run before it starts: how many LM calls ``fit`` and the evaluations make.

The count follows what the engine's trainer and optimizers do (``training/engine/trainers/``,
``training/engine/optimizers/``), so it is exact wherever the run is determined by its
configuration and its data, and a range where it depends on what the model answers:

- Predictions of a deterministic program (temperature 0) are memoised during ``fit`` by
  (variables, input): the calls made under one set of variable values are the *distinct*
  inputs predicted under it. The seed values predict the training inputs and score the
  scoring set (the validation split, else the training set); every new candidate scores the
  scoring set once; when an epoch ends with a new best, the next epoch's training
  predictions are made again under it (unless the scoring set was the training set). Whether
  the best changes is the model's doing: ``low`` assumes never, ``high`` every epoch,
  ``expected`` the chance that an epoch's candidates hold a new record
  (:func:`record_chance`).
  A non-deterministic program pays every prediction (no memo).
- RandomFewShot proposes ``nb_candidates`` example sets at each epoch end (none without
  examples to sample) and makes no LM call of its own. A set drawn twice is scored once
  (the memo): with a small pool that happens, so ``expected`` counts the distinct sets
  expected among the draws (:func:`expected_distinct_draws`).
- OMEGA makes one mutation or crossover call per training batch (when a variable can be
  edited) and scores the new candidate at once, unless the call failed or gave a value
  already in the population (``low``: no step scored; ``high``: every step scored).
- NearestFewShot and CalibratedLabels (cards proposing ``once``) propose one candidate (a
  value built from the training data) at the first epoch end and make no LM call of their
  own; a later epoch proposes the same value, never scored again, so at most one epoch starts
  under a new best. A card that embeds a pool adds embedding calls (the ``embeddings`` part,
  not LM calls): the pool once per fit, batched ``embedding_batch_size`` texts a request; then
  one per distinct input predicted with the pool, each remembered by the Generator (the
  scoring set, the training inputs of an epoch under the pool, the test inputs after fit —
  ``low``: the pool is not kept, no test query).
- The test evaluations (``evaluations_before`` / ``evaluations_after`` passes over the
  test split) and the trained program's sample answers are outside ``fit``: no memo.
- A selection split (``fit(selection_split=...)``, cut off the end before the validation
  split) scores, after the last epoch, the top ``final_selection.TOP_K`` validation candidates
  and the seed (up to ``TOP_K + 1`` contenders) on its rows, still under the memo: the seed
  pays the selection inputs it has not predicted in training or scoring, each other contender
  those outside the scoring set, but a best that started an epoch predicted its training
  inputs too (``low``: each such best is a contender; ``high``: none is). How many
  contenders: ``low`` the seed among the top ``TOP_K``, ``high`` not (``contenders``, when
  known, makes it exact).
- An LM judge (``LMAsJudge``) makes ``judge_calls`` calls per reward scored, memo hits
  included (rewards are always recomputed).

``expected`` weighs the uncertain parts with :func:`record_chance` and
:data:`EXPECTED_STEP_SCORED`. Parse retries (a deterministic call whose output did not parse
is asked once more) are not counted: they are failures, not plan.

Tokens and time come from what recent runs observed per call (``training.forecasting.measured``),
the calls by role: the program's predictions (training and test passes), an LM judge's, an
optimizer's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from training.engine.optimizers.card import DRAWS, ONCE, Card
from training.engine.optimizers.catalog import card_of
from training.engine.optimizers.final_selection import TOP_K

#: Share of OMEGA's steps whose new candidate is scored (not failed, not a duplicate).
EXPECTED_STEP_SCORED = 0.8


def canonical(item: Any) -> str:
    """The memo's notion of "the same input": its JSON with sorted keys."""
    if hasattr(item, "get_json"):
        item = item.get_json()
    return json.dumps(item, sort_keys=True, separators=(",", ":"), default=str)


def validation_cut(count: int, validation_split: float) -> int:
    """Where ``fit`` cuts the validation set off the end (``data_adapter.prepare_fit_data``)."""
    if validation_split <= 0:
        return count
    return count - int(round(count * validation_split))


@dataclass(frozen=True)
class RunShape:
    """What a run will do, as the count needs it.

    Args:
        train_inputs: the inputs ``fit`` receives (before the validation split), as JSON
            objects or DataModels; duplicates matter (the memo).
        test_size: rows of the test split (each evaluation predicts all of them).
        epochs, batch_size, validation_split, selection_split: ``fit``'s arguments.
        optimizer: the optimizer's class name; its card (``optimizers/card.py``) says how
            it proposes candidates and whether it embeds a pool.
        nb_candidates: RandomFewShot's candidates per epoch.
        nb_min_examples, nb_max_examples: how many examples a candidate samples.
        proposes: RandomFewShot has examples to sample (a variable with ``examples`` and
            ``nb_max_examples > 0``); OMEGA has a variable its LM can edit; NearestFewShot
            has a Generator state to hold a pool.
        proposes_certain: False when that depends on the answers (a ChainOfThought's
            examples come only from full-reward predictions): ``low`` then counts none.
        lm_modules: LM calls per prediction (the program's generators).
        deterministic: every generator at temperature 0 (``fit`` memoises predictions).
        evaluations_before, evaluations_after: test passes around ``fit``.
        samples: answers of the trained program shown on the run page (predictions).
        judge_calls: LM calls per reward scored (1 for ``LMAsJudge``, else 0).
        pool_size: most pooled examples (an optimizer whose card embeds a pool).
        embedding_batch_size: texts per request of that pool's embedding model.

    Example:

    ```python
    shape = RunShape(train_inputs=rows, test_size=10, epochs=3, batch_size=8,
                     validation_split=0.2, optimizer="OMEGA")
    print(count_calls(shape).expected)
    ```
    """

    train_inputs: Sequence[Any]
    test_size: int
    epochs: int
    batch_size: int
    validation_split: float = 0.0
    selection_split: float = 0.0
    optimizer: str = "RandomFewShot"
    nb_candidates: int = 1
    nb_min_examples: int = 1
    nb_max_examples: int = 3
    proposes: bool = True
    proposes_certain: bool = True
    lm_modules: int = 1
    deterministic: bool = True
    evaluations_before: int = 1
    evaluations_after: int = 1
    samples: int = 0
    judge_calls: int = 0
    pool_size: int = 256
    embedding_batch_size: int = 64


@dataclass(frozen=True)
class Span:
    """A count that the answers decide within ``low`` … ``high``; ``expected`` between."""

    low: float
    expected: float
    high: float

    def __add__(self, other: Span) -> Span:
        return Span(self.low + other.low, self.expected + other.expected, self.high + other.high)

    def scaled(self, factor: float) -> Span:
        return Span(self.low * factor, self.expected * factor, self.high * factor)

    @classmethod
    def exact(cls, value: float) -> Span:
        return cls(value, value, value)

    def rounded(self) -> dict[str, int]:
        return {
            "low": int(round(self.low)),
            "expected": int(round(self.expected)),
            "high": int(round(self.high)),
        }


@dataclass(frozen=True)
class CallForecast:
    """LM calls of a run, by part (each a :class:`Span`).

    ``predictions``: the program's calls in ``fit``; ``optimizer``: mutations/crossovers;
    ``judge``: an LM judge's calls; ``selection``: the part of ``predictions`` that scores the
    contenders on the selection split (0 without one); ``evaluations``: the test passes and
    sample answers; ``embeddings``: embedding requests of NearestFewShot (not LM calls: not
    in ``total``). ``steps``: training batches per epoch (``epochs`` of them);
    ``candidates``: new candidates scored (OMEGA's steps that score, RandomFewShot's
    proposals). ``candidate_predictions``: the part of
    ``predictions`` made under a new candidate (scoring it, an epoch under a new best);
    ``after_evaluations``: the part of ``evaluations`` made by the trained program (the test
    passes after ``fit`` and the sample answers).
    """

    predictions: Span
    optimizer: Span
    judge: Span
    evaluations: Span
    steps: int
    epochs: int
    candidates: Span
    embeddings: Span = field(default_factory=lambda: Span.exact(0))
    candidate_predictions: Span = field(default_factory=lambda: Span.exact(0))
    after_evaluations: Span = field(default_factory=lambda: Span.exact(0))
    selection: Span = field(default_factory=lambda: Span.exact(0))

    @property
    def total(self) -> Span:
        return self.predictions + self.optimizer + self.judge + self.evaluations

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.rounded(),
            "predictions": self.predictions.rounded(),
            "candidate_predictions": self.candidate_predictions.rounded(),
            "optimizer": self.optimizer.rounded(),
            "judge": self.judge.rounded(),
            "evaluations": self.evaluations.rounded(),
            "selection": self.selection.rounded(),
            "candidates": self.candidates.rounded(),
            "embeddings": self.embeddings.rounded(),
            "steps": self.steps,
            "epochs": self.epochs,
        }


def count_calls(
    shape: RunShape,
    scored: int | None = None,
    best_changes: int | None = None,
    contenders: int | None = None,
) -> CallForecast:
    """The LM calls of a run of ``shape`` (see the module docstring for the rule).

    Args:
        shape: the run's configuration and data.
        scored: how many new candidates were scored, when known (after a run: the count is
            then exact for that part); None: the range.
        best_changes: how many epochs after the first started under a new best, when known.
        contenders: how many candidates (the seed included) were scored on the selection
            split, when known (the ``final_selection`` event's ``contenders``).

    Returns:
        A :class:`CallForecast`.

    Example:

    ```python
    forecast = count_calls(RunShape(train_inputs=rows, test_size=4, epochs=2, batch_size=4))
    forecast.total.expected
    ```
    """
    card = card_of(shape.optimizer)
    train, val, scoring, selection_rows = _fit_sets(shape)
    epochs = max(0, int(shape.epochs))
    steps = math.ceil(len(train) / shape.batch_size) if train else 0
    candidates, optimizer_calls = _new_candidates(shape, card, train, epochs, steps)
    if scored is not None:
        candidates = Span.exact(scored)
    changes = _best_changes(
        _scored_by_epoch(shape, card, train, epochs, steps, candidates), card, candidates
    )
    if best_changes is not None:
        changes = Span.exact(best_changes)
    predictions, under_candidates = _fit_predictions(
        shape, train, val, scoring, epochs, candidates, changes
    )
    selection_rows = selection_rows if epochs else []
    selection = _selection_predictions(
        shape, train, scoring, selection_rows, candidates, contenders, changes
    )
    predictions = (predictions + selection).scaled(shape.lm_modules)
    if selection_rows:  # the contenders besides the seed carry candidate prompts
        under_candidates = (
            under_candidates
            + selection
            + Span.exact(-_seed_selection_part(shape, train, scoring, selection_rows))
        )
    test_passes = shape.evaluations_before + shape.evaluations_after
    rewards = _rewards_scored(
        shape, train, val, scoring, epochs, candidates, contenders, selection_rows
    )
    embeddings = Span.exact(0)
    if card.embeds_pool:
        embeddings = _pool_embeddings(shape, train, scoring, candidates, changes)
    return CallForecast(
        predictions=predictions,
        optimizer=optimizer_calls,
        judge=rewards.scaled(shape.judge_calls),
        evaluations=Span.exact((test_passes * shape.test_size + shape.samples) * shape.lm_modules),
        steps=steps,
        epochs=epochs,
        candidates=candidates,
        embeddings=embeddings,
        candidate_predictions=under_candidates.scaled(shape.lm_modules),
        after_evaluations=Span.exact(
            (shape.evaluations_after * shape.test_size + shape.samples) * shape.lm_modules
        ),
        selection=selection.scaled(shape.lm_modules),
    )


def _fit_sets(shape: RunShape) -> tuple[list, list, list, list]:
    """(training, validation, scoring, selection) inputs as ``fit`` cuts them: the selection
    split off the end first, then the validation split (``data_adapter.prepare_fit_data``);
    the scoring set is the validation set, else the training set."""
    inputs = list(shape.train_inputs)
    selection_rows: list = []
    if shape.selection_split > 0:
        held = validation_cut(len(inputs), shape.selection_split)
        inputs, selection_rows = inputs[:held], inputs[held:]
    cut = validation_cut(len(inputs), shape.validation_split)
    train, val = inputs[:cut], inputs[cut:]
    return train, val, val or train, selection_rows


def _new_candidates(
    shape: RunShape, card: Card, train: list, epochs: int, steps: int
) -> tuple[Span, Span]:
    """(new candidates scored over the whole fit, the optimizer's own LM calls)."""
    if card.proposes == DRAWS:
        proposed = epochs * shape.nb_candidates if shape.proposes else 0
        distinct = float(proposed)  # without memo, each draw is scored
        if shape.deterministic:
            pool = len({canonical(item) for item in train})  # ground truths, one per input
            distinct = expected_distinct_draws(
                pool, shape.nb_min_examples, shape.nb_max_examples, proposed
            )
        low = min(1, proposed) if shape.deterministic else proposed
        if not shape.proposes_certain:
            low = 0
        return Span(low, distinct, proposed), Span.exact(0)
    if card.proposes == ONCE:
        proposed = 1 if shape.proposes and epochs and train else 0
        return Span(proposed if shape.proposes_certain else 0, proposed, proposed), Span.exact(0)
    stepped = epochs * steps if shape.proposes else 0
    return Span(0, stepped * EXPECTED_STEP_SCORED, stepped), Span.exact(stepped)


def record_chance(new: float, scored: float) -> float:
    """The chance that an epoch's ``new`` candidates, of the ``scored`` so far (theirs
    included), hold a new best: a heuristic, for before a run nothing says which is better.

    Taking the seed and the candidates as exchangeable, the best of the ``scored + 1`` values
    is among the newest ``new`` with chance ``new / (scored + 1)``: a new best grows rarer as
    training goes on (a half after the first epoch's one candidate, a third after the
    second's). It leaves out the engine's rule (a candidate replaces the seed only beyond
    noise, and a tie keeps the best), which makes a new best rarer still on a model whose
    candidates answer much as its seed does.

    Example:
        >>> round(record_chance(1, 2), 3)
        0.333
    """
    if new <= 0:
        return 0.0
    return new / (scored + 1)


def _scored_by_epoch(
    shape: RunShape, card: Card, train: list, epochs: int, steps: int, candidates: Span
) -> list[float]:
    """New candidates scored by the end of each epoch (expected), adding up to
    ``candidates.expected``: a small pool's draws repeat more as they go on, so its new sets
    come early; a value proposed once comes at the first epoch's end."""
    if card.proposes == DRAWS:
        per_epoch = shape.nb_candidates if shape.proposes else 0
        pool = len({canonical(item) for item in train})
        by_epoch = [
            expected_distinct_draws(
                pool, shape.nb_min_examples, shape.nb_max_examples, epoch * per_epoch
            )
            if shape.deterministic
            else float(epoch * per_epoch)
            for epoch in range(1, epochs + 1)
        ]
    elif card.proposes == ONCE:
        by_epoch = [1.0] * epochs
    else:
        by_epoch = [float(epoch * steps) for epoch in range(1, epochs + 1)]
    total = by_epoch[-1] if by_epoch else 0.0
    factor = candidates.expected / total if total else 0.0
    return [value * factor for value in by_epoch]


def _best_changes(scored_by_epoch: list[float], card: Card, candidates: Span) -> Span:
    """Epochs (after the first) that may start under a new best: only after a candidate
    (``low`` never, ``high`` each, ``expected`` at :func:`record_chance`)."""
    later = max(0, len(scored_by_epoch) - 1)
    if card.proposes == ONCE:  # one value, proposed once: at most one change
        later = min(1, later)
    expected, before = 0.0, 0.0
    for scored in scored_by_epoch[:later]:
        expected += record_chance(scored - before, scored)
        before = scored
    return Span(0, expected, later if candidates.high else 0)


def _fit_predictions(
    shape: RunShape,
    train: list,
    val: list,
    scoring: list,
    epochs: int,
    candidates: Span,
    changes: Span,
) -> tuple[Span, Span]:
    """The program's predictions in ``fit`` (before the selection split and per generator),
    and the part of them made under new candidates."""
    if epochs == 0:
        return Span.exact(0), Span.exact(0)
    if shape.deterministic:
        train_keys = {canonical(item) for item in train}
        scoring_keys = {canonical(item) for item in scoring}
        seed = len(train_keys | scoring_keys)  # training + seed scoring, one memo
        retrain = len(train_keys - scoring_keys)  # a new best's training predictions
        under_candidates = candidates.scaled(len(scoring_keys)) + changes.scaled(retrain)
        return Span.exact(seed) + under_candidates, under_candidates
    fixed = epochs * len(train) + len(scoring) + epochs * len(val)
    under_candidates = candidates.scaled(len(scoring))
    return Span.exact(fixed) + under_candidates, under_candidates


def _seed_selection_part(shape: RunShape, train: list, scoring: list, selection_rows: list) -> int:
    """The selection predictions the seed pays (its prompts carry no candidate)."""
    if not shape.deterministic:
        return len(selection_rows)
    return len({canonical(i) for i in selection_rows} - {canonical(i) for i in train + scoring})


def _rewards_scored(
    shape: RunShape,
    train: list,
    val: list,
    scoring: list,
    epochs: int,
    candidates: Span,
    contenders: int | None,
    selection_rows: list,
) -> Span:
    """Rewards scored (memo hits included): each training prediction, each scoring, each
    validation pass, each test prediction, each contender's selection pass."""
    test_passes = shape.evaluations_before + shape.evaluations_after
    return (
        Span.exact(epochs * len(train) + (len(scoring) if epochs else 0) + epochs * len(val))
        + candidates.scaled(len(scoring))
        + Span.exact(test_passes * shape.test_size)
        + _contenders(candidates, contenders).scaled(len(selection_rows))
    )


def _contenders(candidates: Span, known: int | None) -> Span:
    """Candidates scored on the selection split, the seed included (``final_selection``)."""
    if known is not None:
        return Span.exact(known)
    return Span(
        1 + min(TOP_K - 1, candidates.low),
        1 + min(TOP_K - 1, candidates.expected),
        1 + min(TOP_K, candidates.high),
    )


def _selection_predictions(
    shape: RunShape,
    train: list,
    scoring: list,
    selection_rows: list,
    candidates: Span,
    contenders: int | None,
    changes: Span,
) -> Span:
    """Predictions that score the contenders on the selection split (module docstring)."""
    if not selection_rows:
        return Span.exact(0)
    others = _contenders(candidates, contenders).scaled(1) + Span.exact(-1)
    if not shape.deterministic:
        return (others + Span.exact(1)).scaled(len(selection_rows))
    sel_keys = {canonical(item) for item in selection_rows}
    train_keys = {canonical(item) for item in train}
    scoring_keys = {canonical(item) for item in scoring}
    seed = len(sel_keys - train_keys - scoring_keys)
    fresh = len(sel_keys - scoring_keys)
    fresh_low = len(sel_keys - scoring_keys - train_keys)

    def paid(others_: float, trained: float) -> float:
        trained = min(others_, trained)  # bests that started an epoch, among the contenders
        return seed + trained * fresh_low + (others_ - trained) * fresh

    return Span(
        paid(others.low, changes.high),
        paid(others.expected, changes.expected),
        paid(others.high, 0),
    )


def _pool_embeddings(
    shape: RunShape, train: list, scoring: list, candidates: Span, changes: Span
) -> Span:
    """The embedding requests of an optimizer that embeds a pool (the module docstring)."""
    train_keys = {canonical(item) for item in train}
    scoring_keys = {canonical(item) for item in scoring}
    pool = min(len(train_keys), shape.pool_size)
    batch = max(1, int(shape.embedding_batch_size))

    def fit_requests(has_candidate: float, changed: float) -> float:
        if not has_candidate:
            return 0.0
        # the pool, then each scored input once, then the training inputs of an epoch under it
        return (
            math.ceil(pool / batch) + len(scoring_keys) + changed * len(train_keys - scoring_keys)
        )

    after = shape.test_size if shape.evaluations_after else 0
    uncached = shape.evaluations_after * shape.test_size + shape.samples
    return Span(
        fit_requests(candidates.low, changes.low),
        fit_requests(candidates.expected, changes.expected) + (after if candidates.expected else 0),
        fit_requests(candidates.high, changes.high) + (uncached if candidates.high else 0),
    )


def evaluation_calls(rows: int, lm_modules: int = 1, judge_calls: int = 0) -> int:
    """LM calls of one scoring pass over ``rows`` examples outside ``fit`` (no memo): each
    example's prediction (one call per generator) and its reward (``judge_calls`` each), as
    the test evaluations are counted above. An ablation's forecast (``training.insight.
    ablation``) is this.

    Example:

    ```python
    evaluation_calls(20, lm_modules=1, judge_calls=1)  # 40
    ```
    """
    return max(0, int(rows)) * (max(1, int(lm_modules)) + max(0, int(judge_calls)))


def expected_distinct_draws(pool: int, nb_min: int, nb_max: int, draws: int) -> float:
    """Distinct example sets expected among ``draws`` RandomFewShot samples of a ``pool``.

    A draw picks a size uniformly in ``nb_min..nb_max`` (clipped to the pool), then an
    ordered sample of that size (``random.sample``): each of the ``perm(pool, k)`` sets of
    size k has probability ``1 / (sizes × perm(pool, k))``. The empty set (size 0) is the
    seed's own value, never new.
    """
    if pool <= 0 or draws <= 0 or nb_max <= 0:
        return 0.0
    high = min(nb_max, pool)
    low = min(nb_min, high)
    sizes = high - low + 1
    expected = 0.0
    for size in range(max(low, 1), high + 1):
        count = float(math.perm(pool, size))
        chance = 1.0 / (sizes * count)
        if chance >= 1.0:  # the pool's one set of this size: drawn at the first draw
            expected += count
            continue
        expected += count * -math.expm1(draws * math.log1p(-chance))
    return expected
