"""The guide's Rewards / Metrics / Data Preparation / Visualization snippets, import line changed.

Snippets that need ``compile``/``fit``/``evaluate`` are exercised with the trainer's tests;
here every object the guide constructs is built with the guide's own arguments and used.
"""

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.rewards.helpers_rewards import Answer, AnswerWithThinking, Query
from tests.engine.rewards.helpers_rewards import word_overlap_reward as my_reward  # guide body
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


@synalinks.saving.register_synalinks_serializable()
async def my_metric(y_true, y_pred):
    return float(y_true.get("x") == y_pred.get("x"))


@pytest.mark.asyncio
async def test_rewards_section():
    em = FakeEmbeddingModel()
    lm = FakeLanguageModel(responder=lambda request: {"critique": "fine", "score": 0.9})
    rewards = [
        synalinks.rewards.ExactMatch(
            in_mask=["answer"],  # Only compare these fields
            out_mask=None,  # Exclude these fields
        ),
        synalinks.rewards.CosineSimilarity(
            embedding_model=em,
            in_mask=["answer"],
        ),
        synalinks.rewards.LMAsJudge(
            language_model=lm,
            criteria="accuracy and completeness",
        ),
        synalinks.rewards.MeanRewardWrapper(fn=my_reward),
        # Field masking
        synalinks.rewards.ExactMatch(in_mask=["answer"]),
        synalinks.rewards.ExactMatch(out_mask=["thinking"]),
        synalinks.rewards.ExactMatch(),
    ]
    truth = AnswerWithThinking(thinking="He wrote it in 1600.", answer="William Shakespeare")
    pred = AnswerWithThinking(thinking="He wrote it in 1600.", answer="William Shakespeare")
    for reward in rewards:
        assert await reward(truth, pred) == pytest.approx(0.9 if "judge" in reward.name else 1.0)
        assert await reward(truth, None) == 0.0


@pytest.mark.asyncio
async def test_metrics_section():
    metrics = [
        synalinks.metrics.F1Score(in_mask=["answer"]),
        synalinks.metrics.Precision(in_mask=["answer"]),
        synalinks.metrics.Recall(in_mask=["answer"]),
        synalinks.metrics.F1Score(),
    ]
    for metric in metrics:
        await metric.update_state(Answer(answer="Paris"), Answer(answer="paris."))
        assert metric.result() == 1.0
    custom = synalinks.metrics.MeanMetricWrapper(fn=my_metric)
    await custom.update_state({"x": 1}, {"x": 1})
    assert custom.result() == 1.0


def test_data_preparation_section():
    # Input DataModels
    x_train = np.array(
        [
            Query(query="What is 2+2?"),
            Query(query="Capital of France?"),
            Query(query="Who wrote Hamlet?"),
        ],
        dtype="object",
    )

    # Target DataModels
    y_train = np.array(
        [
            Answer(answer="4"),
            Answer(answer="Paris"),
            Answer(answer="William Shakespeare"),
        ],
        dtype="object",
    )
    assert x_train.shape == y_train.shape == (3,)

    (x_train, y_train), (x_test, y_test) = synalinks.datasets.gsm8k.load_data()
    assert len(x_train) == len(y_train) and len(x_test) == len(y_test)


def test_visualization_section(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    class History:
        history = {"reward": [0.2, 0.5], "val_reward": [0.1, 0.4]}

    history = History()
    synalinks.utils.plot_history(
        history,
        to_folder="output",
        to_file="training_history.png",
    )

    results = []
    for i in range(5):
        metrics = {"reward": 0.5 + 0.02 * i, "f1_score": 0.6 - 0.01 * i}
        results.append(metrics)

    synalinks.utils.plot_metrics_with_mean_and_std(
        results,
        to_folder="output",
        title="Evaluation Results",
    )

    baseline_results, trained_results = results[:2], results[2:]
    comparison = {
        "before_training": baseline_results,
        "after_training": trained_results,
    }

    synalinks.utils.plot_metrics_comparison_with_mean_and_std(
        comparison,
        to_folder="output",
        title="Training Improvement",
    )
    assert sorted(p.name for p in (tmp_path / "output").iterdir()) == [
        "evaluation_metrics_comparison_with_mean_and_std.png",
        "evaluation_metrics_with_mean_and_std.png",
        "training_history.png",
    ]
