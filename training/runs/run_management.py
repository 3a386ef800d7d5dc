"""Managing runs and programs: rename, notes, tags, archive, delete (one or many).

Deleting a run takes everything it produced with it (epoch logs, candidates, evaluations,
LM call traces, optimizer errors, tags: ``on_delete=CASCADE``; its plot PNGs under
``var/plots/run-<id>/`` once the transaction commits). A queued or running run is refused:
its worker still writes rows, so it must be cancelled first. A version promoted from a
deleted run stays (its lineage keeps the run's number). Deleting a program is refused while
any run references it, naming those runs; once they are gone the dataset they used can be
deleted too (``datasets.services.delete_dataset``).

Every function takes rows the caller already owner-checked (``training.runs.selectors``).

Example:

    run_management.update_details(run, name="baseline", notes="", tags="rfs, keep")
    deleted, refused = run_management.delete_runs(selectors.owned_runs(user, ids))
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import models, transaction

from training.models import Program, Run, RunTag

NAME_MAX_CHARS = Run._meta.get_field("name").max_length
NOTES_MAX_CHARS = 10_000
TAG_MAX_CHARS = RunTag._meta.get_field("name").max_length
TAGS_PER_RUN = 20
TAG_PATTERN = re.compile(r"^[\w][\w .:+-]*$")
RUNS_NAMED = 10  # runs a refusal names before "and N more"


class ManagementError(ValueError):
    """A management action that was refused; the message says why and what to do."""


# --- details: name, notes, tags ----------------------------------------------------------


def parse_tags(text: str) -> list[str]:
    """Comma-separated tags → a list without duplicates (first spelling kept, order kept).

    Raises:
        ManagementError: a tag too long or with other characters than letters, digits,
            spaces and ``. : + - _``, or more than ``TAGS_PER_RUN`` tags.
    """
    tags: list[str] = []
    seen: set[str] = set()
    for raw in (text or "").split(","):
        tag = " ".join(raw.split())
        if not tag:
            continue
        if len(tag) > TAG_MAX_CHARS:
            raise ManagementError(f"tag “{tag[:50]}” is longer than {TAG_MAX_CHARS} characters")
        if not TAG_PATTERN.match(tag):
            raise ManagementError(
                f"tag “{tag}” may only hold letters, digits, spaces and . : + - _ "
                "(and must start with a letter or digit)"
            )
        if tag.lower() not in seen:
            seen.add(tag.lower())
            tags.append(tag)
    if len(tags) > TAGS_PER_RUN:
        raise ManagementError(f"a run takes at most {TAGS_PER_RUN} tags ({len(tags)} given)")
    return tags


def update_details(run: Run, *, name: str, notes: str, tags: str) -> Run:
    """Rename ``run``, replace its notes and its tags (``parse_tags``)."""
    name = " ".join((name or "").split())
    if len(name) > NAME_MAX_CHARS:
        raise ManagementError(f"the name is longer than {NAME_MAX_CHARS} characters")
    notes = (notes or "").strip()
    if len(notes) > NOTES_MAX_CHARS:
        raise ManagementError(f"the notes are longer than {NOTES_MAX_CHARS:,} characters")
    tag_list = parse_tags(tags)
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(name=name, notes=notes)
        run.tags.exclude(name__in=tag_list).delete()
        have = set(run.tags.values_list("name", flat=True))
        RunTag.objects.bulk_create(
            [RunTag(run=run, name=tag) for tag in tag_list if tag not in have]
        )
    run.name, run.notes = name, notes
    return run


def add_tag(runs: Iterable[Run], text: str) -> int:
    """Put the tag(s) in ``text`` on every run of ``runs``; returns how many runs were given
    a tag they lacked. A run already at ``TAGS_PER_RUN`` tags is refused by name."""
    tags = parse_tags(text)
    if not tags:
        raise ManagementError("type a tag to add")
    changed = 0
    with transaction.atomic():
        for run in runs:
            have = {tag.lower() for tag in run.tags.values_list("name", flat=True)}
            new = [tag for tag in tags if tag.lower() not in have]
            if not new:
                continue
            if len(have) + len(new) > TAGS_PER_RUN:
                raise ManagementError(
                    f"run #{run.pk} would have more than {TAGS_PER_RUN} tags; nothing was tagged"
                )
            RunTag.objects.bulk_create([RunTag(run=run, name=tag) for tag in new])
            changed += 1
    return changed


def set_archived(runs: Iterable[Run], archived: bool) -> int:
    """Archive (hide from the runs list unless "show archived") or unarchive; returns how
    many runs changed."""
    ids = [run.pk for run in runs]
    return Run.objects.filter(pk__in=ids).exclude(archived=archived).update(archived=archived)


# --- deleting ------------------------------------------------------------------------------


def _plot_dir(run_pk: int) -> Path:
    return Path(settings.VAR_DIR) / "plots" / f"run-{run_pk}"


def delete_run(run: Run) -> None:
    """Delete ``run`` and everything it produced.

    Raises:
        ManagementError: the run is queued or running (decided on the locked row, not on
            what the page read): cancel it first.
    """
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:
            return  # already gone (a second click, another tab)
        if locked.status in Run.ACTIVE:
            raise ManagementError(
                f"Run #{run.pk} is {locked.get_status_display().lower()}: cancel it first, "
                "then delete it."
            )
        folder = _plot_dir(run.pk)
        locked.delete()
        transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))


def delete_runs(runs: Iterable[Run]) -> tuple[list[int], list[str]]:
    """Delete each run that is not queued or running; returns (deleted ids, refusals)."""
    deleted, refused = [], []
    for run in runs:
        try:
            delete_run(run)
        except ManagementError as exc:
            refused.append(str(exc))
        else:
            deleted.append(run.pk)
    return deleted, refused


def _named(pks: list[int]) -> str:
    shown = ", ".join(f"#{pk}" for pk in pks[:RUNS_NAMED])
    more = len(pks) - RUNS_NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def delete_program(program: Program) -> None:
    """Delete ``program`` with its versions.

    Raises:
        ManagementError: runs still reference it (named): delete those runs first.
    """
    refusal = program_in_use(program)
    if refusal:
        raise ManagementError(refusal)
    try:
        with transaction.atomic():
            program.delete()
    except models.ProtectedError:  # a run launched between the check and the delete
        raise ManagementError(program_in_use(program) or "a run uses it") from None


def program_in_use(program: Program) -> str | None:
    """Why ``program`` cannot be deleted now (the runs that use it), or None."""
    pks = list(Run.objects.filter(program=program).order_by("-pk").values_list("pk", flat=True))
    if not pks:
        return None
    runs = "run" if len(pks) == 1 else "runs"
    verb = "uses" if len(pks) == 1 else "use"
    return (
        f"“{program.name}” cannot be deleted: {len(pks)} {runs} {verb} it ({_named(pks)}). "
        "Delete those runs first."
    )
