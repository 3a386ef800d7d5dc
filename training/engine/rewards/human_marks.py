"""``HumanMarks``: a reward that takes people's word first and falls back to another reward.

People look at predictions and mark some of them right or wrong (or give them a score). When
training meets one of those predictions again for the same expected answer, the person's mark
is the reward; every other prediction is scored by the ``fallback`` reward (the run's own,
e.g. ``ExactMatch`` or ``LMAsJudge``), in one batch so a judge still batches its calls.

A mark is keyed on what the reward compares: the expected answer and the prediction after
the masks (``in_mask``/``out_mask``, the fallback's by default), and, when the mark names
them, the example's ``inputs``. A reward only sees ``(y_true, y_pred)``, so whoever builds the
targets says which inputs each one belongs to with :func:`attach_inputs` (the dashboard does,
for every example of a run). A mark with ``inputs`` applies to that example only; a mark
without applies to every example with that expected answer and prediction (on a label task:
"for expected X, answer Y counts as right/wrong" everywhere). Marks are plain JSON (saved in
the config; no pickle, no code).
"""

from __future__ import annotations

import json
from typing import Any

from training.engine.masking import apply_mask, to_dict
from training.engine.rewards.reward import Reward, check_score, is_batch
from training.engine.saving import deserialize, register_synalinks_serializable, serialize

#: At most this many marks in one reward (they are saved with the program and the run).
MAX_MARKS = 10_000
#: The attribute :func:`attach_inputs` sets on a ground truth (not a field: masks, metrics
#: and ``get_json`` never see it).
INPUTS_ATTRIBUTE = "_human_marks_inputs"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _key(inputs: str | None, expected: dict[str, Any] | None, predicted: dict[str, Any]) -> str:
    return _canonical([inputs, expected, predicted])


def attach_inputs(y_true: Any, inputs: Any) -> Any:
    """Say which example's inputs ``y_true`` (a ground-truth DataModel) belongs to, so marks
    made on that example (``{"inputs": ...}``) match it and no other. Returns ``y_true``.

    Example:

    ```python
    y = [attach_inputs(Answer(answer=a), {"query": q}) for q, a in rows]
    ```
    """
    fields = to_dict(inputs)
    if y_true is not None and not isinstance(y_true, dict):
        setattr(y_true, INPUTS_ATTRIBUTE, _canonical(fields))
    return y_true


@register_synalinks_serializable(package="synalinks")
class HumanMarks(Reward):
    """People's marks first, the ``fallback`` reward for every prediction nobody marked.

    Args:
        marks: ``[{"inputs": {...}, "expected": {...}, "predicted": {...}, "reward": 0..1}]``:
            the example's inputs (optional: without them the mark applies to every example
            with that expected answer and prediction), the expected answer, the prediction
            a person judged, and their verdict (1.0 right, 0.0 wrong). At most
            ``MAX_MARKS``; a later mark of the same example and prediction wins.
        fallback: the reward for unmarked predictions (a ``Reward`` or its serialized
            config). Default ``ExactMatch`` on the same masks.
        in_mask: compare these fields (default: the fallback's ``in_mask``).
        out_mask: leave these fields out (default: the fallback's ``out_mask``).
        name: default ``human_marks``.

    Returns:
        A reward in [0, 1] per prediction (a failed prediction, ``None``, scores 0.0).
        ``hits`` counts the predictions scored by a mark, ``fallbacks`` the others.

    Example:

    ```python
    reward = synalinks.rewards.HumanMarks(
        marks=[{"expected": {"answer": "4"}, "predicted": {"answer": "four"}, "reward": 1.0}],
        fallback=synalinks.rewards.ExactMatch(in_mask=["answer"]),
    )
    program.compile(reward=reward, optimizer=synalinks.optimizers.RandomFewShot())
    ```
    """

    def __init__(
        self,
        marks: list[dict[str, Any]] | None = None,
        fallback: Any = None,
        in_mask: list[str] | None = None,
        out_mask: list[str] | None = None,
        name: str | None = None,
    ):
        if isinstance(fallback, dict):
            fallback = deserialize(fallback)
        if fallback is None:
            from training.engine.rewards.exact_match import ExactMatch

            fallback = ExactMatch(in_mask=in_mask, out_mask=out_mask)
        if not isinstance(fallback, Reward):
            raise TypeError(f"HumanMarks(fallback=...) must be a Reward, got {fallback!r:.80}")
        if in_mask is None and out_mask is None:
            in_mask, out_mask = fallback.in_mask, fallback.out_mask
        super().__init__(name=name, in_mask=in_mask, out_mask=out_mask)
        self.fallback = fallback
        marks = list(marks or [])
        if len(marks) > MAX_MARKS:
            raise ValueError(f"HumanMarks takes at most {MAX_MARKS} marks, got {len(marks)}")
        self.marks: list[dict[str, Any]] = []
        self._index: dict[str, float] = {}
        for position, mark in enumerate(marks):
            self._add(position, mark)
        self.hits = 0
        self.fallbacks = 0

    def _add(self, position: int, mark: Any) -> None:
        where = f"HumanMarks mark {position}"
        if not isinstance(mark, dict) or not isinstance(mark.get("predicted"), dict):
            raise ValueError(f"{where}: expected {{'expected', 'predicted', 'reward'}} objects")
        expected = mark.get("expected")
        if expected is not None and not isinstance(expected, dict):
            raise ValueError(f"{where}: 'expected' must be an object or null")
        inputs = mark.get("inputs")
        if inputs is not None and not isinstance(inputs, dict):
            raise ValueError(f"{where}: 'inputs' must be an object or null")
        reward = check_score(mark.get("reward"), where)
        clean = json.loads(json.dumps({"expected": expected, "predicted": mark["predicted"]}))
        if inputs is not None:
            clean = {"inputs": json.loads(json.dumps(inputs)), **clean}
        clean["reward"] = reward
        self.marks.append(clean)
        scope = None if inputs is None else _canonical(clean["inputs"])
        self._index[self._mark_key(scope, clean["expected"], clean["predicted"])] = reward

    def _mask(self, fields: Any) -> dict[str, Any] | None:
        return apply_mask(to_dict(fields), self.in_mask, self.out_mask, strict=False)

    def _mark_key(self, inputs: str | None, expected: Any, predicted: Any) -> str:
        return _key(inputs, self._mask(expected), self._mask(predicted))

    def lookup(self, y_true: Any, y_pred: Any) -> float | None:
        """The person's reward for this pair (a mark on this example first, then one without
        inputs), or None when nobody marked it."""
        if y_pred is None:
            return None
        inputs = getattr(y_true, INPUTS_ATTRIBUTE, None)
        if inputs is not None:
            found = self._index.get(self._mark_key(inputs, y_true, y_pred))
            if found is not None:
                return found
        return self._index.get(self._mark_key(None, y_true, y_pred))

    async def score_batch(self, y_true: Any, y_pred: Any) -> list[float]:
        trues, preds = self._pairs(y_true, y_pred)
        scores: list[float | None] = [
            0.0 if pred is None else self.lookup(true, pred)
            for true, pred in zip(trues, preds, strict=True)
        ]
        rest = [i for i, score in enumerate(scores) if score is None]
        self.hits += sum(
            1 for i, score in enumerate(scores) if score is not None and preds[i] is not None
        )
        self.fallbacks += len(rest)
        if rest:
            fallback = await self.fallback.score_batch(
                [trues[i] for i in rest], [preds[i] for i in rest]
            )
            for i, value in zip(rest, fallback, strict=True):
                scores[i] = check_score(value, self.fallback.where)
        return [float(score) for score in scores]

    async def __call__(self, y_true: Any, y_pred: Any) -> float:
        scores = await self.score_batch(y_true, y_pred)
        if is_batch(y_true) or is_batch(y_pred):
            return float(sum(scores) / len(scores)) if scores else 0.0
        return scores[0]

    @property
    def failed_judgements(self) -> int | None:
        """The fallback judge's count (LMAsJudge), so the trainer records its failures."""
        return getattr(self.fallback, "failed_judgements", None)

    @property
    def language_model(self) -> Any:
        return getattr(self.fallback, "language_model", None)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["marks"] = [dict(mark) for mark in self.marks]
        config["fallback"] = serialize(self.fallback)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None) -> HumanMarks:
        config = dict(config)
        config["fallback"] = deserialize(config.get("fallback"), custom_objects)
        return cls(**config)

    def __repr__(self) -> str:
        return f"<HumanMarks marks={len(self.marks)} fallback={self.fallback!r}>"
