"""The engine's PNG plots of a run, generated on demand into var/plots/run-<id>/."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from training.execution import summaries
from training.models import Evaluation, Run

KINDS = ("history", "evaluation", "difference")


class NoPlotData(LookupError):
    pass


def plot_dir(run: Run) -> Path:
    path = Path(settings.VAR_DIR) / "plots" / f"run-{run.pk}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def plot_for(run: Run, kind: str) -> Path:
    from training.engine import utils

    if kind not in KINDS:
        raise NoPlotData(f"unknown plot {kind!r}; available: {', '.join(KINDS)}")
    folder = plot_dir(run)
    if kind == "history":
        data = summaries.history(run.epoch_logs.all())
        if not data["epochs"]:
            raise NoPlotData("this run has no completed epoch yet")
        series = {
            key: [value if value is not None else float("nan") for value in values]
            for key, values in data["series"].items()
        }
        return Path(
            utils.plot_history(
                series,
                to_folder=str(folder),
                to_file="history.png",
                title=f"Run #{run.pk}: training history",
            )
        )
    if kind == "difference":
        evaluations = list(run.evaluations.all())
        before = summaries.per_example_means(evaluations, Evaluation.BEFORE)
        after = summaries.per_example_means(evaluations, Evaluation.AFTER)
        if before is None or after is None or len(before) != len(after):
            raise NoPlotData("this run has no per-example test rewards before and after training")
        return Path(
            utils.plot_reward_difference_with_bootstrap(
                before,
                after,
                to_folder=str(folder),
                to_file="difference.png",
                title=f"Run #{run.pk}: test reward before / after training",
            )
        )
    before = [e.metrics for e in run.evaluations.filter(phase=Evaluation.BEFORE)]
    after = [e.metrics for e in run.evaluations.filter(phase=Evaluation.AFTER)]
    # Every evaluation scores the test split; "mean ± std" only over several evaluations
    # (over one, the std is no spread at all: the page says the same).
    ylabel = "Test score (mean ± std)" if max(len(before), len(after)) > 1 else "Test score"
    if before and after:
        return Path(
            utils.plot_metrics_comparison_with_mean_and_std(
                {"test before training": before, "test after training": after},
                to_folder=str(folder),
                to_file="evaluation.png",
                title=f"Run #{run.pk}: test split before / after training",
                ylabel=ylabel,
            )
        )
    results = before or after
    if not results:
        raise NoPlotData("this run has no evaluation yet")
    return Path(
        utils.plot_metrics_with_mean_and_std(
            results,
            to_folder=str(folder),
            to_file="evaluation.png",
            title=f"Run #{run.pk}: test split {'before' if before else 'after'} training",
            ylabel=ylabel,
        )
    )
