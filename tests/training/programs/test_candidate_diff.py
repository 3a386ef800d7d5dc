"""What candidate pages and diffs show of a learned label decision."""

from __future__ import annotations

import numpy as np

from training.engine.modules import label_readout
from training.programs.candidate_diff import decision_summary, diff_values


def decision_with_readout() -> dict:
    weights, intercepts = label_readout.fit_readout(np.eye(4)[:, :3], np.eye(2)[[0, 1, 0, 1]])
    return {
        "field": "label",
        "bias": {"yes": 0.25, "no": -0.25},
        "lm_weight": 0.5,
        "vote_weight": 1.5,
        "readout_weight": 2.0,
        "readout": label_readout.to_json(weights, intercepts, ["yes", "no"], "local/minilm"),
    }


def test_a_decision_reads_as_its_parts_and_weights_not_its_vectors():
    decision = decision_with_readout()
    summary = decision_summary(decision)
    assert summary["text"] == (
        "label: LM scores × 0.5 + the nearest examples' vote × 1.5 + the embedding read-out × 2 "
        "+ bias (yes +0.25, no -0.25)"
    )
    old, new = {"instructions": "x"}, {"instructions": "x", "decision": decision}
    lines = [line for _, line in diff_values(old, new, "seed", "trained")]
    assert not any(decision["readout"]["weights"]["yes"] in line for line in lines)
    assert any("the embedding read-out × 2" in line for line in lines)
