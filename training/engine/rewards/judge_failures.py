"""JudgeFailureRecorder: turns a judge reward's ``failed_judgements`` count into usage records.

Judge rewards (LMAsJudge, ProgramAsJudge) count the judgements that gave no usable score in
``reward.failed_judgements`` (and score them 0.0). The trainer records each new one into usage,
so ``usage.judge_failures`` (and ``history.usage["judge_failures"]``) tells a run how many of its
zero rewards were judge failures. A reward without that counter records nothing.
"""

from __future__ import annotations

from typing import Any

from training.engine.language_models import usage as usage_mod


def _failure_count(reward: Any) -> int | None:
    count = getattr(reward, "failed_judgements", None)
    return count if isinstance(count, int) and not isinstance(count, bool) else None


class JudgeFailureRecorder:
    """Records, once each, the judge failures a reward counted since the last look.

    Example:

    ```python
    recorder = JudgeFailureRecorder()
    recorder.start(reward)  # before scoring
    scores = await reward.score_batch(y_true, y_pred)
    recorder.record(reward)  # one usage record per new failed judgement
    ```
    """

    def __init__(self) -> None:
        self._reward: Any = None
        self._seen = 0

    def start(self, reward: Any) -> None:
        """Start counting from the reward's current total when the reward is new to us."""
        if self._reward is not reward:
            self._reward = reward
            self._seen = _failure_count(reward) or 0

    def record(self, reward: Any) -> None:
        """Record the judge failures since the last look (no await in here: each is counted
        once even when several evaluations score concurrently)."""
        now = _failure_count(reward)
        if now is None:
            return
        new, self._seen = now - self._seen, now
        judge = getattr(getattr(reward, "language_model", None), "model", None)
        model = judge or str(getattr(reward, "name", "judge"))
        for _ in range(max(0, new)):
            usage_mod.record(usage_mod.UsageRecord(model=model, kind="judge", failed=True))
