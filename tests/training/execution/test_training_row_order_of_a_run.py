"""A run's pages find its validation rows in the order its ``fit`` was given them.

A run launched from the dashboard has its training rows spread by label; a run whose config
says ``file_order`` (a run from code) was fit on the rows in file order, and its validation
rows, ablations and marks must be found in that order.
"""

from __future__ import annotations

import pytest

from datasets.services import training_rows
from tests.training.conftest import run_config as config_of
from training.engine.trainers.data_adapter import scoring_positions
from training.execution import ablation, run_config
from training.insight.example_rows import validation_rows
from training.models import Run
from training.runs.launch import launch

pytestmark = pytest.mark.django_db


def test_a_run_finds_its_rows_in_the_order_it_was_fit_on(user, program, demo_dataset, no_broker):
    # a label set (as an upload with one gets): new runs get their rows spread by label
    demo_dataset.stratify_by = demo_dataset.target_names[0]
    demo_dataset.save(update_fields=["stratify_by"])
    new = launch(user, program, demo_dataset, config_of(validation_split=0.25))
    assert run_config.spreads_by_label(new.config)
    from_code = Run.objects.create(
        owner=user,
        program=program,
        dataset=demo_dataset,
        config={**new.config, "training_order": run_config.FILE_ORDER},
    )
    file_order = training_rows(demo_dataset, spread_by_label=False)
    spread = training_rows(demo_dataset)
    assert [i for i, _ in file_order] != [i for i, _ in spread]
    positions = scoring_positions(len(spread), 0.25)

    assert validation_rows.scoring_rows(new) == [spread[p] for p in positions]
    assert validation_rows.scoring_rows(from_code) == [file_order[p] for p in positions]
    inputs, _, split = ablation.scoring_rows(from_code)
    inputs_names = demo_dataset.input_names
    assert split == "validation"
    assert inputs == [{n: file_order[p][1].get(n) for n in inputs_names} for p in positions]
