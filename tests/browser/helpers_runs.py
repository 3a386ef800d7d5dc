"""Helpers (no tests) for the runs browser tests and bench/stream_latency.py: live stack seeding."""

from __future__ import annotations

import json


def shell(live_stack, code: str) -> str:
    """Run Python in ``manage.py shell`` against the live database; returns the last line."""
    out = live_stack.manage("shell", "-c", code).stdout.strip().splitlines()
    return out[-1] if out else ""


def demo_dataset_id(live_stack) -> int:
    return int(
        shell(
            live_stack,
            "from datasets.models import Dataset as D;print(D.objects.get(owner__username='tester', builtin_key='demo').pk)",
        )
    )


def tiny_dataset_id(live_stack, train: int = 4, test: int = 2) -> int:
    """A 'tiny routing' dataset (rows of the demo dataset) so the local model finishes fast."""
    code = f"""
from datasets.models import Dataset, DatasetRow
demo = Dataset.objects.get(owner__username='tester', builtin_key='demo')
tiny, created = Dataset.objects.get_or_create(owner=demo.owner, name='tiny routing', defaults=dict(
    original_name='tiny.jsonl', format='jsonl', input_fields=demo.input_fields, target_fields=demo.target_fields,
    row_count={train + test}, train_count={train}, test_count={test}))
if created:
    train_rows = list(demo.rows.filter(split='train').order_by('index')[:{train}])
    test_rows = list(demo.rows.filter(split='test').order_by('index')[:{test}])
    for i, row in enumerate(train_rows + test_rows):
        DatasetRow.objects.create(dataset=tiny, index=i, split=row.split, data=row.data)
print(tiny.pk)
"""
    return int(shell(live_stack, code))


def create_program(live_stack, name: str, model: str, dataset_id: int, max_tokens=None) -> int:
    code = f"""
from django.contrib.auth import get_user_model
from datasets.models import Dataset
from training.models import Program
from training.services.programs import build_engine_program
user = get_user_model().objects.get(username='tester')
dataset = Dataset.objects.get(pk={dataset_id})
engine = build_engine_program(name={name!r}, input_fields=dataset.input_schema_fields(), target_fields=dataset.target_schema_fields(), module='Generator', instructions='Route it.', model={model!r}, max_tokens={max_tokens!r})
program = Program.objects.create(owner=user, name={name!r}, dataset=dataset, module='Generator', instructions='Route it.', model={model!r}, engine_json=engine.get_config())
print(program.pk)
"""
    return int(shell(live_stack, code))


def launch_run(live_stack, program_id: int, dataset_id: int, **config) -> int:
    """Create a run through the same services as the launch form, enqueued to the worker."""
    code = f"""
from django.contrib.auth import get_user_model
from datasets.models import Dataset
from training.models import Program
from training.services import programs as ps, runs
from training.services.run_config import validate_run_config
user = get_user_model().objects.get(username='tester')
program = Program.objects.get(pk={program_id}); dataset = Dataset.objects.get(pk={dataset_id})
engine = ps.program_from_json(program.engine_json)
config = validate_run_config({json.dumps(config)}, ps.output_field_names(engine), dataset.target_names, program.model)
print(runs.launch(user, program, dataset, config).pk)
"""
    return int(shell(live_stack, code))


#: A run on a fake LM that is still going whenever a test acts on it (as many epochs as a run
#: may have: the engine's prediction memo makes repeated epochs of a fake take milliseconds).
ENDLESS = {"epochs": 1000, "batch_size": 9, "evaluations_before": 0, "evaluations_after": 0}


def launch_demo_run(live_stack, name: str, model: str, *, evaluations=(0, 0), **config) -> int:
    """Create a program ``name`` on ``model`` over the demo dataset and launch it with
    ``config``; ``evaluations`` = (test evaluations before, after), none unless asked."""
    dataset_id = demo_dataset_id(live_stack)
    program_id = create_program(live_stack, name, model, dataset_id)
    before, after = evaluations
    config.setdefault("evaluations_before", before)
    config.setdefault("evaluations_after", after)
    return launch_run(live_stack, program_id, dataset_id, **config)


def open_launch_form(page, live_stack, name: str, model: str, optimizer: str) -> int:
    """Create a program ``name`` on ``model`` over the demo dataset and open its launch form in
    ``page`` with that dataset and ``optimizer`` chosen; returns the dataset id."""
    dataset_id = demo_dataset_id(live_stack)
    program_id = create_program(live_stack, name, model, dataset_id)
    page.goto(f"/runs/new/?program={program_id}")
    page.select_option("#id_dataset", str(dataset_id))
    page.select_option("#id_optimizer", optimizer)
    return dataset_id


def run_field(live_stack, run_id: int, field: str):
    return json.loads(
        shell(
            live_stack,
            f"import json;from training.models import Run;print(json.dumps(Run.objects.filter(pk={run_id}).values_list({field!r}, flat=True).first(), default=str))",
        )
    )


def open_advanced(page) -> None:
    """Unfold the launch form's "Advanced settings" (seed, evaluations, optimizer details)."""
    page.evaluate("document.getElementById('advanced-settings').open = true")
