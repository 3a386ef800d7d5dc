"""The demo every member starts with: the demo dataset and a program on the default model.

The demo shows the best practice on a small model: its output ``team`` is the dataset's
label set (``datasets.labels.program_target_fields``), so the model can only answer one of
the three codes, and the home page's "Quick try" trains it (the preset ``quick`` of
``training.execution.run_config``). ``manage.py bootstrap_demo`` gives it to every user at
each start; the Team page to each member it adds (``TRAINBOARD_NEW_MEMBER_HOOKS``).
Idempotent.
"""

from django.conf import settings

from datasets import labels as dataset_labels
from datasets.services import create_demo_dataset
from training.models import Program
from training.programs.programs import build_engine_program

DEMO_NAME = "Demo: route support messages"
DEMO_MAX_TOKENS = 24  # {"team": "ledger"} is ~8 tokens; a small model must not ramble
DEMO_INSTRUCTIONS = (
    "Decide which team should handle the customer's message. Answer with the team's code name only."
)


def ensure_demo_program(user, model: str | None = None) -> Program:
    dataset = create_demo_dataset(user)
    existing = Program.objects.filter(owner=user, name=DEMO_NAME, dataset=dataset).first()
    if existing is not None:
        return existing
    model = model or settings.TRAINBOARD_LM
    engine_program = build_engine_program(
        name="demo_router",
        input_fields=dataset.input_schema_fields(),
        target_fields=dataset_labels.program_target_fields(dataset, use_label_sets=True),
        module=Program.GENERATOR,
        instructions=DEMO_INSTRUCTIONS,
        model=model,
        description="Route a support message to a team",
        max_tokens=DEMO_MAX_TOKENS,
    )
    return Program.objects.create(
        owner=user,
        name=DEMO_NAME,
        description="Built by make run: the demo dataset on the default local model.",
        dataset=dataset,
        module=Program.GENERATOR,
        instructions=DEMO_INSTRUCTIONS,
        model=model,
        temperature=0.0,
        max_tokens=DEMO_MAX_TOKENS,
        source=Program.SOURCE_FORM,
        engine_json=engine_program.get_config(),
    )
