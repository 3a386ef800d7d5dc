"""Metrics: SQuAD-style token F1/precision/recall, running means, custom metrics, configs."""

import numpy as np
import pytest

import training.engine as synalinks
from tests.engine.rewards.helpers_rewards import Answer, AnswerWithThinking
from training.engine.metrics.text_normalization import normalize_answer, tokenize
from training.engine.saving import UnknownObjectError, deserialize, serialize


class Number(synalinks.DataModel):
    answer: float


@synalinks.saving.register_synalinks_serializable()
async def same_answer(y_true, y_pred):
    """The guide's custom metric, on the `answer` field."""
    return float(y_true.get("answer") == y_pred.get("answer"))


@synalinks.saving.register_synalinks_serializable()
async def answer_length(y_true, y_pred):
    return len(y_pred.get("answer"))


def test_squad_normalisation():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a pear & the plum.") == "apple pear plum"
    assert normalize_answer("Janet’s “ducks”") == "janets ducks"
    assert tokenize(18.0) == ["18"] and tokenize(2.5) == ["25"]
    assert tokenize(["New York", "Paris"]) == ["new", "york", "paris"]


@pytest.mark.asyncio
async def test_f1_precision_recall_on_a_known_pair():
    # truth tokens: [eiffel, tower], prediction tokens: [eiffel, tower, in, paris]
    truth, pred = Answer(answer="The Eiffel Tower."), Answer(answer="eiffel tower in Paris")
    values = {}
    for metric in (
        synalinks.metrics.F1Score(),
        synalinks.metrics.Precision(),
        synalinks.metrics.Recall(),
    ):
        await metric.update_state(truth, pred)
        values[metric.name] = metric.result()
    assert values["precision"] == pytest.approx(0.5)
    assert values["recall"] == pytest.approx(1.0)
    assert values["f1_score"] == pytest.approx(2 * 0.5 * 1.0 / 1.5)


@pytest.mark.asyncio
async def test_repeated_tokens_count_as_multisets():
    metric = synalinks.metrics.F1Score()
    await metric.update_state(Answer(answer="no no no"), Answer(answer="no no no"))
    assert metric.result() == 1.0
    precision = synalinks.metrics.Precision()
    await precision.update_state(Answer(answer="no"), Answer(answer="no no"))
    assert precision.result() == 0.5


@pytest.mark.asyncio
async def test_in_mask_limits_the_compared_fields():
    truth = AnswerWithThinking(thinking="add two and two", answer="4")
    pred = AnswerWithThinking(thinking="something else entirely", answer="4")
    masked = synalinks.metrics.F1Score(in_mask=["answer"])
    unmasked = synalinks.metrics.F1Score()
    await masked.update_state(truth, pred)
    await unmasked.update_state(truth, pred)
    assert masked.result() == 1.0
    assert unmasked.result() == pytest.approx(0.5)  # mean of answer (1.0) and thinking (0.0)


@pytest.mark.asyncio
async def test_extra_prediction_fields_are_ignored_without_mask():
    # the ground truth decides which fields are scored
    metric = synalinks.metrics.F1Score()
    await metric.update_state(
        Answer(answer="4"), AnswerWithThinking(thinking="long text", answer="4")
    )
    assert metric.result() == 1.0


@pytest.mark.asyncio
async def test_numbers_compare_without_trailing_zero():
    metric = synalinks.metrics.F1Score()
    await metric.update_state(Number(answer=18), {"answer": 18.0})
    assert metric.result() == 1.0


@pytest.mark.asyncio
async def test_running_mean_over_samples_and_batches_then_reset():
    metric = synalinks.metrics.F1Score(in_mask=["answer"])
    await metric.update_state(Answer(answer="paris"), Answer(answer="paris"))
    await metric.update_state(
        np.array([Answer(answer="rome"), Answer(answer="oslo")], dtype=object),
        np.array([Answer(answer="madrid"), None], dtype=object),
    )
    assert metric.count == 3
    assert metric.result() == pytest.approx(1 / 3)
    metric.reset_state()
    assert metric.result() == 0.0 and metric.count == 0


@pytest.mark.asyncio
async def test_none_prediction_scores_zero():
    metric = synalinks.metrics.Recall()
    await metric.update_state(Answer(answer="x"), None)
    assert metric.result() == 0.0 and metric.count == 1


@pytest.mark.asyncio
async def test_empty_answers():
    metric = synalinks.metrics.F1Score()
    await metric.update_state(Answer(answer=""), Answer(answer="the"))  # both normalise to nothing
    await metric.update_state(Answer(answer="x"), Answer(answer=""))
    assert metric.result() == pytest.approx(0.5)


@pytest.mark.asyncio
async def test_unknown_mask_field_names_metric_field_and_fields():
    metric = synalinks.metrics.Precision(in_mask=["anwser"])
    with pytest.raises(ValueError) as info:
        await metric.update_state(Answer(answer="4"), Answer(answer="4"))
    message = str(info.value)
    assert "precision" in message and "'anwser'" in message and "['answer']" in message


def test_metric_names_and_configs_round_trip():
    for cls, name in (
        (synalinks.metrics.F1Score, "f1_score"),
        (synalinks.metrics.Precision, "precision"),
        (synalinks.metrics.Recall, "recall"),
    ):
        metric = cls(in_mask=["answer"])
        assert metric.name == name
        restored = deserialize(serialize(metric))
        assert type(restored) is cls and restored.get_config() == metric.get_config()


@pytest.mark.asyncio
async def test_mean_metric_wrapper_runs_the_guide_metric():
    metric = synalinks.metrics.MeanMetricWrapper(fn=same_answer)
    assert metric.name == "same_answer"
    await metric.update_state(Answer(answer="4"), Answer(answer="4"))
    await metric.update_state(Answer(answer="4"), Answer(answer="5"))
    await metric.update_state(Answer(answer="4"), None)
    assert metric.result() == pytest.approx(1 / 3)


@pytest.mark.asyncio
async def test_mean_metric_wrapper_allows_any_finite_number():
    metric = synalinks.metrics.MeanMetricWrapper(fn=answer_length)
    await metric.update_state(Answer(answer="x"), Answer(answer="four"))
    assert metric.result() == 4.0


@pytest.mark.asyncio
async def test_mean_metric_wrapper_rejects_non_numbers_naming_the_function():
    async def bad_metric(y_true, y_pred):
        return "high"

    metric = synalinks.metrics.MeanMetricWrapper(fn=bad_metric)
    with pytest.raises(TypeError, match="bad_metric.*'high'"):
        await metric.update_state(Answer(answer="4"), Answer(answer="4"))


def test_mean_metric_wrapper_config_uses_the_registered_name():
    metric = synalinks.metrics.MeanMetricWrapper(fn=same_answer)
    assert metric.get_config()["fn"] == "Custom>same_answer"
    restored = deserialize(serialize(metric))
    assert restored.fn is same_answer and restored.name == "same_answer"

    async def unregistered(y_true, y_pred):
        return 1.0

    with pytest.raises(UnknownObjectError, match="unregistered"):
        synalinks.metrics.MeanMetricWrapper(fn=unregistered).get_config()


def test_metrics_get():
    assert isinstance(synalinks.metrics.get("F1Score"), synalinks.metrics.F1Score)
    assert isinstance(synalinks.metrics.get(same_answer), synalinks.metrics.MeanMetricWrapper)
