"""Program versions: version 1 as created, later versions promoted from finished runs.

A run trains a copy of a program; what it learnt (instructions, few-shot examples) lives in
``Run.trained_program_json``. "Save as new program version" (``promote``) stores that JSON
as the program's next version, with its lineage (the run, the version the run started from,
the run's test reward before and after). A run launched from a version trains that version's
JSON (``Run.program_version``; ``Run.launch_json``). The program row is never rewritten, so
version 1 is always the program as created.

Example:

    version = program_versions.promote(run)          # run succeeded, owner-checked
    runs.launch(user, version.program, dataset, config, version=version)
    program_versions.compare(older, newer)["variables"][0]["lines"]
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.db.models.signals import post_save
from django.dispatch import receiver

from training.models import Program, ProgramVersion, Run
from training.programs import candidate_diff


class PromoteError(ValueError):
    """A run whose trained program cannot become a version; the message says why."""


@receiver(post_save, sender=Program, dispatch_uid="program_versions.first_version")
def _first_version(sender, instance: Program, created: bool, raw: bool = False, **kwargs) -> None:
    """Every program gets version 1 (its own JSON) when it is created, however it is created
    (the form, an import, a test fixture): "version 1 = the program as created" always holds."""
    if created and not raw:
        first_version(instance)


def first_version(program: Program) -> ProgramVersion:
    """Version 1 of ``program`` (created from ``Program.engine_json`` if missing)."""
    version, _ = ProgramVersion.objects.get_or_create(
        program=program,
        number=1,
        defaults={"engine_json": program.engine_json},
    )
    return version


def promote(run: Run) -> ProgramVersion:
    """Save ``run``'s trained program as its program's next version.

    Args:
        run: a succeeded run (already owner-checked by the caller).

    Returns:
        The new ProgramVersion (number = highest + 1), lineage filled in.

    Raises:
        PromoteError: the run has not succeeded, has no trained program, or was already saved.
    """
    if run.status != Run.SUCCEEDED or not run.trained_program_json:
        raise PromoteError(
            f"Only a succeeded run's trained program can be saved as a version; "
            f"run #{run.pk} is {run.get_status_display().lower()}."
        )
    existing = ProgramVersion.objects.filter(source_run=run).first()
    if existing is not None:
        raise PromoteError(
            f"Run #{run.pk} is already saved as version {existing.number} of “{run.program.name}”."
        )
    try:
        with transaction.atomic():
            # Lock the program row: two promotions at once get consecutive numbers.
            program = Program.objects.select_for_update().get(pk=run.program_id)
            parent = run.program_version or first_version(program)
            highest = program.versions.aggregate(top=Max("number"))["top"] or 1
            return ProgramVersion.objects.create(
                program=program,
                number=highest + 1,
                engine_json=run.trained_program_json,
                source_run=run,
                source_run_number=run.pk,
                parent=parent,
                test_reward=run.final_reward,
                baseline_reward=run.baseline_reward,
            )
    except IntegrityError:  # the same run promoted twice at once: the one-to-one refused it
        raise PromoteError(f"Run #{run.pk} is already saved as a version.") from None


# --- what a version holds ------------------------------------------------------------------


def variables_of(document: Any) -> dict[str, dict]:
    """A version's trainable variables (name → value: instructions, examples), read from the
    stored JSON without building the program (it may come from an upload: nothing trusted)."""
    variables = document.get("variables") if isinstance(document, dict) else None
    if not isinstance(variables, dict):
        return {}
    found = {}
    for name, config in variables.items():
        value = config.get("value") if isinstance(config, dict) else None
        found[str(name)] = value if isinstance(value, dict) else {}
    return found


def summary_of(version: ProgramVersion) -> list[dict[str, Any]]:
    """Per variable: its name, how many fixed few-shot examples, its retrieval pool (how
    many pooled, how many nearest go in each prompt or vote), whether a label decision is
    learned, its instructions. A retrieval program's examples are its pool: never "0
    examples" beside a run that says "4 nearest of 77 pooled"."""
    rows = []
    for name, value in variables_of(version.engine_json).items():
        examples = value.get("examples")
        instructions = value.get("instructions")
        retrieval = value.get("retrieval") if isinstance(value.get("retrieval"), dict) else {}
        pool = retrieval.get("pool") if isinstance(retrieval.get("pool"), list) else []
        rows.append(
            {
                "name": name,
                "examples": len(examples) if isinstance(examples, list) else 0,
                "pooled": len(pool),
                "nearest": retrieval.get("k") if pool else None,
                "in_prompt": retrieval.get("in_prompt", True) is not False,
                "decision": isinstance(value.get("decision"), dict),
                "instructions": instructions if isinstance(instructions, str) else "",
            }
        )
    return rows


def compare(old: ProgramVersion, new: ProgramVersion) -> dict[str, Any]:
    """A line diff per variable from ``old`` to ``new`` (``candidate_diff``'s layout: the
    instructions as prose, one JSON line per example).

    Returns:
        ``{"old", "new", "variables": [{"name", "lines", "changed"}]}``, lines as
        ``(css class, text)``; a variable only one version has is diffed against nothing.
    """
    old_vars, new_vars = variables_of(old.engine_json), variables_of(new.engine_json)
    names = list(old_vars) + [name for name in new_vars if name not in old_vars]
    variables = []
    for name in names:
        lines = candidate_diff.diff_values(
            old_vars.get(name, {}),
            new_vars.get(name, {}),
            fromfile=f"version {old.number}",
            tofile=f"version {new.number}",
        )
        if not lines:  # identical: show the text once, unmarked
            text = candidate_diff.as_text(new_vars.get(name, {}))
            lines = [("diff-same", " " + line) for line in text.splitlines()]
        variables.append(
            {
                "name": name,
                "lines": lines,
                "changed": any(css in ("diff-add", "diff-del") for css, _ in lines),
            }
        )
    return {"old": old, "new": new, "variables": variables}
