"""Branching: start a new run from any candidate of a run, after a person's edits.

A person who sees where a search went wrong picks a candidate (or the run's best), rewrites
its instructions, removes few-shot examples or pins them (a pinned example stays in every
candidate the optimizer proposes: ``Variable.pin_examples`` in the engine), and launches a
new run with the parent run's settings (prefilled, editable). The branch gets its own
Program (source ``branch``): the parent run's program with

- the candidate's variable set to the edited value, its pins recorded;
- every other variable set to the value of the candidate with the same id when the
  optimizer proposed them together (RandomFewShot), else kept as the program had it;
- no stored candidates, so the new run's seed candidate is the edited value.

The new run records ``parent_run`` and ``parent_candidate``; ``run_tree.as_tree`` lays the
runs list and the compare page out as a tree from those.

Example:

    source = branching.best_candidate(run)
    edits = branching.Edits(instructions="Answer with one word.", examples=["pin", "remove"])
    new_run = branching.launch_branch(user, run, source, edits, dataset, config)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from training import optimizer_registry
from training.models import Candidate, Program, Run
from training.programs.programs import ProgramError, program_from_json, summarize
from training.runs import launch as runs

#: A branch's rewritten instructions may hold at most this many characters.
MAX_INSTRUCTIONS_CHARS = 20_000
#: What a person can do with each few-shot example of the candidate.
EXAMPLE_ACTIONS = ("keep", "pin", "remove")


class BranchError(ValueError):
    """A branch that cannot be made; the message says why, for the person who asked."""


@dataclass
class Edits:
    """A person's edits of the candidate's value.

    Args:
        instructions: the new instructions (None keeps the candidate's).
        examples: one action per example of the candidate, in order (``keep``, ``pin``,
            ``remove``); missing ones are kept.
        edited: {position: the example written anew} for examples kept (or pinned) with new
            inputs/outputs (``example_edits.parse_example`` checked them).
        added: examples to put after the candidate's own (checked alike).
    """

    instructions: str | None = None
    examples: list[str] = field(default_factory=list)
    edited: dict[int, dict[str, Any]] = field(default_factory=dict)
    added: list[dict[str, Any]] = field(default_factory=list)


def best_candidate(run: Run) -> Candidate | None:
    """The candidate the run ended with (status ``best``), else its highest-scored one."""
    candidates = run.candidates.all()
    return candidates.filter(status="best").first() or candidates.exclude(reward=None).first()


def edited_value(candidate: Candidate, edits: Edits) -> tuple[dict[str, Any], list[dict]]:
    """The candidate's value after ``edits``, and the examples to pin; BranchError if unusable."""
    value = dict(candidate.value or {})
    if edits.instructions is not None and "instructions" in value:
        text = edits.instructions.replace("\r\n", "\n").strip()
        if len(text) > MAX_INSTRUCTIONS_CHARS:
            raise BranchError(
                f"Instructions may hold at most {MAX_INSTRUCTIONS_CHARS} characters, "
                f"got {len(text)}."
            )
        value["instructions"] = text
    examples = list(value.get("examples") or [])
    actions = list(edits.examples) + ["keep"] * (len(examples) - len(edits.examples))
    bad = [action for action in actions if action not in EXAMPLE_ACTIONS]
    if bad:
        raise BranchError(f"Each example is kept, pinned or removed, not {bad[0]!r}.")
    examples = [edits.edited.get(i, e) for i, e in enumerate(examples)]
    if "examples" in value:
        kept = [e for e, a in zip(examples, actions, strict=False) if a != "remove"]
        value["examples"] = [*kept, *edits.added]
    elif edits.edited or edits.added:
        raise BranchError("This candidate holds no few-shot examples to edit.")
    pinned = [e for e, a in zip(examples, actions, strict=False) if a == "pin"]
    return value, pinned


def _group_values(candidate: Candidate) -> dict[str, dict[str, Any]]:
    """Values of the candidates proposed together with this one (same id), by variable."""
    together = Candidate.objects.filter(
        run_id=candidate.run_id, candidate_id=candidate.candidate_id
    )
    return {c.variable: c.value for c in together}


def branch_document(run: Run, candidate: Candidate, edits: Edits) -> dict[str, Any]:
    """The branch program's engine JSON (see the module docstring); BranchError if unusable."""
    value, pinned = edited_value(candidate, edits)
    try:
        program = program_from_json(run.program.engine_json)
    except ProgramError as exc:
        raise BranchError(f"The run's program cannot be loaded here: {exc}") from None
    values = _group_values(candidate)
    values[candidate.variable] = value
    variables = {variable.name: variable for variable in program.variables}
    if candidate.variable not in variables:
        raise BranchError(f"The program has no variable {candidate.variable!r} any more.")
    try:
        for name, variable in variables.items():
            if name in values:
                variable.assign(values[name])
            variable.candidates = []
            variable.pin_examples(pinned if name == candidate.variable else [])
    except ValueError as exc:  # VariableError: the edit does not fit the variable's schema
        raise BranchError(str(exc)) from None
    return program.get_config()


def create_branch_program(owner, run: Run, candidate: Candidate, edits: Edits) -> Program:
    """Save the branch's Program row (source ``branch``) from ``branch_document``."""
    document = branch_document(run, candidate, edits)
    summary = summarize(program_from_json(document))
    parent = run.program
    return Program.objects.create(
        owner=owner,
        name=f"{parent.name} · branch of run #{run.pk} {candidate.candidate_id}"[:200],
        description=f"Branched from candidate {candidate.candidate_id} of run #{run.pk}.",
        dataset=parent.dataset,
        module=parent.module,
        instructions=summary["instructions"],
        model=parent.model,
        api_base=parent.api_base,
        temperature=parent.temperature,
        max_tokens=parent.max_tokens,
        source=Program.SOURCE_BRANCH,
        engine_json=document,
    )


def launch_branch(
    owner, run: Run, candidate: Candidate, edits: Edits, dataset, config: dict[str, Any]
) -> Run:
    """Create the branch program and its run (parent run and candidate recorded), enqueued
    with its forecast, as any launch."""
    if candidate.run_id != run.pk or run.owner_id != owner.pk:
        raise BranchError("That candidate is not one of this run's.")
    with transaction.atomic():
        program = create_branch_program(owner, run, candidate, edits)
        return runs.launch(
            owner, program, dataset, config, parent_run=run, parent_candidate=candidate
        )


def pinned_in_program(run: Run, variable: str) -> list[dict[str, Any]]:
    """The examples already pinned on ``variable`` in the run's program (a branch of a
    branch starts with its parent's pins ticked)."""
    try:
        program = program_from_json(run.program.engine_json)
    except ProgramError:
        return []
    for item in program.variables:
        if item.name == variable:
            return list(item.pinned_examples)
    return []


def initial_from_config(run: Run) -> dict[str, Any]:
    """The launch form's initial values for ``run``'s stored configuration (a prefill)."""
    config = run.config or {}
    reward = config.get("reward") or {}
    initial: dict[str, Any] = {
        "program": run.program_id,
        "dataset": run.dataset_id,
        "reward": reward.get("name", "ExactMatch"),
        "reward_in_mask": ", ".join(reward.get("in_mask") or []),
        "reward_out_mask": ", ".join(reward.get("out_mask") or []),
        "reward_embedding_model": reward.get("embedding_model", ""),
        "reward_language_model": reward.get("language_model", ""),
        "reward_criteria": reward.get("criteria", "accuracy and completeness"),
        "reward_human_marks": bool(reward.get("judge_by_people")),
        "metrics": [metric["name"] for metric in config.get("metrics") or []],
        "metrics_in_mask": ", ".join(
            ((config.get("metrics") or [{}])[0].get("in_mask") or [])
            if config.get("metrics")
            else []
        ),
    }
    for key in (
        "epochs",
        "batch_size",
        "validation_split",
        "selection_split",
        "shuffle",
        "seed",
        "evaluations_before",
        "evaluations_after",
    ):
        if key in config:
            initial[key] = config[key]
    optimizer = config.get("optimizer") or {}
    name = optimizer.get("name") or optimizer_registry.recommended(label_task=False)
    initial["optimizer"] = name
    prefix = optimizer_registry.card(name).prefix if optimizer_registry.offered(name) else ""
    for key, value in (optimizer.get("params") or {}).items():
        initial[prefix + key] = value
    return initial
