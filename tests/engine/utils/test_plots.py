"""Plot utilities write real PNGs and reject malformed input with clear errors."""

import os

import pytest

import training.engine as synalinks

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png(path, min_width=400):
    from matplotlib.image import imread  # not at collection: about 0.7 s in every process

    assert os.path.isfile(path)
    with open(path, "rb") as handle:
        assert handle.read(8) == PNG_MAGIC
    height, width = imread(path).shape[:2]
    assert width >= min_width and height >= 300
    return width, height


class FakeHistory:
    """Duck-typed like History: the per-epoch values are in ``.history``."""

    def __init__(self, history):
        self.history = history


HISTORY = {
    "reward": [0.2, 0.35, 0.5],
    "val_reward": [0.1, 0.3, 0.45],
    "f1_score": [0.3, 0.4, 0.55],
    "val_f1_score": [0.2, 0.35, 0.5],
}


def test_plot_history_from_a_history_object(tmp_path):
    path = synalinks.utils.plot_history(
        FakeHistory(HISTORY), to_folder=str(tmp_path), to_file="training_history.png"
    )
    assert path == str(tmp_path / "training_history.png")
    width, height = assert_png(path)
    assert width > height  # reward and f1 panels side by side


def test_plot_history_from_a_plain_dict_with_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = synalinks.utils.plot_history({"reward": [0.5], "val_reward": [0.4]})
    assert path == "training_history.png"
    assert_png(tmp_path / "training_history.png", min_width=300)


def test_plot_history_creates_the_folder_and_adds_png(tmp_path):
    path = synalinks.utils.plot_history(
        {"reward": [0.1, 0.2]}, to_folder=str(tmp_path / "out" / "runs"), to_file="history"
    )
    assert path.endswith(os.path.join("out", "runs", "history.png"))
    assert_png(path, min_width=300)


def test_plot_history_filter_and_errors(tmp_path):
    path = synalinks.utils.plot_history(HISTORY, to_folder=str(tmp_path), metrics_filter=["reward"])
    assert_png(path, min_width=300)
    with pytest.raises(ValueError, match="unknown metrics.*accuracy"):
        synalinks.utils.plot_history(HISTORY, to_folder=str(tmp_path), metrics_filter=["accuracy"])
    with pytest.raises(ValueError, match="empty"):
        synalinks.utils.plot_history({"reward": []}, to_folder=str(tmp_path))
    with pytest.raises(TypeError, match="History"):
        synalinks.utils.plot_history([0.1, 0.2], to_folder=str(tmp_path))
    with pytest.raises(TypeError, match=r"history\['reward'\]\[1\]"):
        synalinks.utils.plot_history({"reward": [0.1, "high"]}, to_folder=str(tmp_path))


def test_plot_metrics_with_mean_and_std(tmp_path):
    results = [
        {"reward": 0.5, "f1_score": 0.6},
        {"reward": 0.6, "f1_score": 0.62},
        {"reward": 0.55, "f1_score": 0.7},
    ]
    path = synalinks.utils.plot_metrics_with_mean_and_std(
        results, to_folder=str(tmp_path), title="Evaluation Results"
    )
    assert path == str(tmp_path / "evaluation_metrics_with_mean_and_std.png")
    assert_png(path)
    custom = synalinks.utils.plot_metrics_with_mean_and_std(
        results[:1], to_folder=str(tmp_path), title="One run", to_file="one.png"
    )
    assert_png(custom)


def test_plot_metrics_with_mean_and_std_errors(tmp_path):
    with pytest.raises(ValueError, match="non-empty list"):
        synalinks.utils.plot_metrics_with_mean_and_std([], to_folder=str(tmp_path), title="x")
    with pytest.raises(ValueError, match=r"\[1\] lacks \['f1_score'\]"):
        synalinks.utils.plot_metrics_with_mean_and_std(
            [{"reward": 0.5, "f1_score": 0.2}, {"reward": 0.4}], to_folder=str(tmp_path), title="x"
        )
    with pytest.raises(TypeError, match="number"):
        synalinks.utils.plot_metrics_with_mean_and_std(
            [{"reward": "0.5"}], to_folder=str(tmp_path), title="x"
        )


def test_plot_metrics_comparison_with_mean_and_std(tmp_path):
    comparison = {
        "before_training": [{"reward": 0.3, "f1_score": 0.4}, {"reward": 0.35, "f1_score": 0.42}],
        "after_training": [{"reward": 0.6, "f1_score": 0.7}, {"reward": 0.66, "f1_score": 0.71}],
    }
    path = synalinks.utils.plot_metrics_comparison_with_mean_and_std(
        comparison, to_folder=str(tmp_path), title="Training Improvement"
    )
    assert path == str(tmp_path / "evaluation_metrics_comparison_with_mean_and_std.png")
    assert_png(path)


def test_plot_metrics_comparison_errors(tmp_path):
    with pytest.raises(ValueError, match="non-empty dict"):
        synalinks.utils.plot_metrics_comparison_with_mean_and_std({}, to_folder=str(tmp_path))
    with pytest.raises(ValueError, match="same metrics"):
        synalinks.utils.plot_metrics_comparison_with_mean_and_std(
            {"a": [{"reward": 0.1}], "b": [{"f1_score": 0.2}]}, to_folder=str(tmp_path)
        )
