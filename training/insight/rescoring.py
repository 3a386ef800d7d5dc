"""Re-score a finished run from the predictions already stored, with no program call.

When corrections are published (a typed answer changes a row's expected value, a mark says
a prediction was right or wrong: the next version of the dataset) or the reward is changed
(ExactMatch with other masks, with or without people's marks), a run's figures can be brought
up to date without running it again:

- its test evaluations before/after training: each stored ``EvaluationExample`` prediction;
- every scored candidate that kept its predictions (``Candidate.example_predictions``, bounded
  by ``training/execution/recording/candidate_predictions.py``): scored on the same
  validation rows of the other version (``scoring_positions`` finds which training rows those
  were), so the page can say which candidates changed rank.

Offered here for rewards that need no model (``RESCORABLE``); a judge reward calls its judge
and only it, in a worker, after a forecast of those calls (``judge_rescore``). Read-only:
the stored figures stay what the run measured.

Each function takes a run its caller already checked belongs to the user (``owned_run``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import training.engine as synalinks
from datasets import versions
from datasets.models import Dataset, DatasetRow
from training.engine.data_model import create_data_model
from training.execution.run_config import build_reward
from training.insight.eval_table import first_evaluations
from training.insight.example_rows.validation_rows import scoring_rows
from training.models import Candidate, Evaluation, EvaluationExample, Run
from training.programs.programs import connected_language_model

#: Rewards scored again without any model call.
RESCORABLE = ("ExactMatch",)
#: Rewards that call a model (their re-score runs in a worker, after a forecast).
JUDGED = ("LMAsJudge",)
PHASES = (Evaluation.BEFORE, Evaluation.AFTER)


class RescoreError(ValueError):
    """Why this run cannot be re-scored on that version (said on the page)."""


def other_versions(run: Run) -> list[Dataset]:
    """The versions of the run's dataset other than the one it used, oldest first."""
    return [d for d in versions.versions_of(run.dataset) if d.pk != run.dataset_id]


def all_versions(run: Run) -> list[Dataset]:
    """Every version of the run's dataset, its own included, oldest first."""
    return list(versions.versions_of(run.dataset))


def reward_spec(run: Run, name: str | None = None, ignore: list[str] | None = None) -> dict:
    """The run's reward specification with ``name`` and the ignored fields (``out_mask``)
    changed; the run's own when neither is given."""
    spec = dict(run.config.get("reward") or {})
    if name is None and ignore is None:
        return spec
    if name and name != spec.get("name"):
        spec = {"name": name, "in_mask": spec.get("in_mask")}
    spec["out_mask"] = (list(ignore) or None) if ignore is not None else spec.get("out_mask")
    return spec


def same_reward(one: dict, other: dict) -> bool:
    """Whether two reward specifications score alike (a missing key is its default)."""

    def key(spec: dict) -> tuple:
        return (
            spec.get("name"),
            spec.get("in_mask") or None,
            spec.get("out_mask") or None,
            bool(spec.get("judge_by_people")),
            spec.get("language_model") or None,
            spec.get("criteria") or None,
            spec.get("embedding_model") or None,
        )

    return key(one) == key(other)


def _targets(dataset: Dataset, row_indices: list[int]) -> dict[int, dict[str, Any]]:
    rows = DatasetRow.objects.filter(dataset=dataset, index__in=row_indices)
    names = dataset.target_names
    return {row.index: {name: row.data.get(name) for name in names} for row in rows}


class _Scorer:
    """Scores stored predictions of rows of the run's dataset on ``version`` with a reward."""

    def __init__(self, run: Run, version: Dataset, reward: Any) -> None:
        self.run, self.version, self.reward = run, version, reward
        self.target_model = create_data_model("Target", version.target_schema_fields())

    def rows(self, split: str) -> list[tuple[int, dict]]:
        return list(
            self.run.dataset.rows.filter(split=split).order_by("index").values_list("index", "data")
        )

    def score(self, rows: list[tuple[int, dict]], predictions: list[Any]) -> list[float]:
        """Each prediction's reward against its row's answer in ``version`` (the row's own
        answer where that version lacks the row)."""
        names = self.run.dataset
        new = _targets(self.version, [index for index, _ in rows])
        truths = [
            synalinks.rewards.attach_inputs(
                self.target_model(**new.get(index, {n: data.get(n) for n in names.target_names})),
                {n: data.get(n) for n in names.input_names},
            )
            for index, data in rows
        ]
        return list(asyncio.run(self.reward.score_batch(truths, predictions)))


def check(run: Run, version: Dataset, spec: dict, allow_model: bool = False) -> None:
    """RescoreError when this run cannot be re-scored on ``version`` with ``spec``."""
    name = spec.get("name")
    if name not in RESCORABLE and not (allow_model and name in JUDGED):
        raise RescoreError(
            f"{name} needs its model to score again; re-scoring here is offered for "
            f"{', '.join(RESCORABLE)} (with or without people's marks), a judge in a worker."
        )
    if run.is_active:
        raise RescoreError("The run is still going: re-score it once it has finished.")
    if versions.line_root(version).pk != versions.line_root(run.dataset).pk:
        raise RescoreError("That is not a version of this run's dataset.")


def rescore(
    run: Run, version: Dataset, spec: dict | None = None, allow_model: bool = False
) -> dict[str, Any]:
    """The run's stored predictions scored on ``version`` with the reward ``spec`` (the run's
    own by default): per test phase the stored mean and the new one and the examples whose
    reward changed; per stored candidate its old and new validation mean and rank.
    RescoreError if it cannot be."""
    spec = spec or reward_spec(run)
    check(run, version, spec, allow_model)
    evaluations = first_evaluations(run)
    candidates = stored_candidates(run)
    if not evaluations and not candidates:
        raise RescoreError("This run stored no predictions to score again.")
    config = {**run.config, "reward": spec}
    # a judge that is the program's model goes where the program's model goes
    program_model = (
        connected_language_model(run.launch_json, run.owner) if spec.get("name") in JUDGED else None
    )
    reward = build_reward(config, marks=versions.human_marks(version), program_model=program_model)
    scorer = _Scorer(run, version, reward)
    return {
        "version": version,
        "phases": _phases(scorer, evaluations),
        "candidates": _candidates(scorer, candidates),
        "unscored_candidates": _unscored(run),
        "reward_name": spec.get("name"),
        "reward_changed": not same_reward(spec, run.config.get("reward") or {}),
        "spec": spec,
    }


def _phases(scorer: _Scorer, evaluations: dict[str, Evaluation]) -> list[dict[str, Any]]:
    test_rows = scorer.rows(DatasetRow.TEST)
    names = scorer.run.dataset.target_names
    phases = []
    for phase in PHASES:
        evaluation = evaluations.get(phase)
        if evaluation is None:
            continue
        stored = {
            index: (reward, prediction)
            for index, reward, prediction in EvaluationExample.objects.filter(
                evaluation=evaluation
            ).values_list("example_index", "reward", "prediction")
        }
        positions = [i for i in sorted(stored) if i < len(test_rows)]
        if not positions:
            continue
        rows = [test_rows[i] for i in positions]
        scores = scorer.score(rows, [stored[i][1] for i in positions])
        new_targets = _targets(scorer.version, [index for index, _ in rows])
        changed = []
        for i, (index, data), score in zip(positions, rows, scores, strict=True):
            old = stored[i][0]
            if old is None or abs(score - old) > 1e-9:
                before = {n: data.get(n) for n in names}
                changed.append(
                    {
                        "index": i,
                        "expected_before": before,
                        "expected_now": new_targets.get(index, before),
                        "prediction": stored[i][1],
                        "old": old,
                        "new": score,
                    }
                )
        old_mean = sum(stored[i][0] or 0.0 for i in positions) / len(positions)
        new_mean = sum(scores) / len(scores)
        phases.append(
            {
                "phase": phase,
                "old": old_mean,
                "new": new_mean,
                "difference": new_mean - old_mean,
                "changed": changed,
                "examples": len(positions),
            }
        )
    return phases


def stored_candidates(run: Run) -> list[Candidate]:
    """One candidate per candidate id that kept its predictions (a joint candidate of several
    variables is one scoring), in the order they were stored."""
    seen: dict[str, Candidate] = {}
    kept = run.candidates.filter(example_predictions__isnull=False).defer(None).order_by("id")
    for candidate in kept:
        seen.setdefault(candidate.candidate_id, candidate)
    return list(seen.values())


def _unscored(run: Run) -> int:
    """Scored candidate ids that kept no predictions (past the per-run bound, or older)."""
    ids = set(run.candidates.filter(reward__isnull=False).values_list("candidate_id", flat=True))
    kept = set(
        run.candidates.filter(example_predictions__isnull=False).values_list(
            "candidate_id", flat=True
        )
    )
    return len(ids - kept)


def validation_rows(scorer: _Scorer) -> list[tuple[int, dict]]:
    """The training rows the run's optimizer scored candidates on, in order (the per-example
    table's validation rows are the same: ``insight.validation_rows``)."""
    return scoring_rows(scorer.run)


def _ranks(values: list[float]) -> list[int]:
    """1-based competition ranks, highest first (ties share the better rank)."""
    return [1 + sum(1 for other in values if other > value + 1e-9) for value in values]


def _candidates(scorer: _Scorer, candidates: list[Candidate]) -> list[dict[str, Any]]:
    if not candidates:
        return []
    rows = validation_rows(scorer)
    entries = []
    for candidate in candidates:
        predictions = list(candidate.example_predictions or [])[: len(rows)]
        if not predictions:
            continue
        scores = scorer.score(rows[: len(predictions)], predictions)
        stored = list(candidate.example_rewards or [])[: len(predictions)]
        old = (
            sum(stored) / len(stored)
            if len(stored) == len(predictions)
            else float(candidate.reward or 0.0)
        )
        entries.append(
            {
                "candidate_id": candidate.candidate_id,
                "variable": candidate.variable,
                "operation": candidate.operation,
                "url": candidate.get_absolute_url(),
                "examples": len(predictions),
                "old": old,
                "new": sum(scores) / len(scores),
                "changed_examples": sum(
                    1 for s, o in zip(scores, stored, strict=False) if abs(s - o) > 1e-9
                ),
            }
        )
    old_ranks = _ranks([e["old"] for e in entries])
    new_ranks = _ranks([e["new"] for e in entries])
    for entry, old_rank, new_rank in zip(entries, old_ranks, new_ranks, strict=True):
        entry.update(
            old_rank=old_rank,
            new_rank=new_rank,
            rank_changed=old_rank != new_rank,
            difference=entry["new"] - entry["old"],
        )
    return sorted(entries, key=lambda e: (e["new_rank"], e["old_rank"]))


def judge_calls(run: Run) -> int:
    """The forecast of a judge re-score: one judge call per stored prediction that did not
    fail (before/after test examples and every stored candidate's)."""
    evaluations = first_evaluations(run).values()
    tests = EvaluationExample.objects.filter(
        evaluation__in=list(evaluations), prediction__isnull=False
    ).count()
    rows = len(validation_rows(_Scorer(run, run.dataset, None))) if stored_candidates(run) else 0
    candidates = sum(
        len([p for p in (c.example_predictions or [])[:rows] if p is not None])
        for c in stored_candidates(run)
    )
    return tests + candidates
