""" "Use this one": save a cheaper candidate that is within noise of the best as a program
version.

Why: the run's trained program is its best validation candidate, but a candidate with half
the prompt tokens whose reward is within noise of the best is, for the same quality, the
better program to ship. The run page offers it (``training.insight.candidate_confidence``:
``cheaper_within_noise``); this saves it as the program's next version, with the run and the
candidate in its lineage, without a new run.

Example:
    version = candidate_versions.save_candidate(run, candidate)
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from training.models import Candidate, Program, ProgramVersion, Run
from training.programs import program_versions
from training.runs import branching


class CandidateVersionError(ValueError):
    """A candidate that cannot be saved as a version; the message says why."""


def save_candidate(run: Run, candidate: Candidate) -> ProgramVersion:
    """Save ``candidate`` (of ``run``, both owner-checked by the caller) as the next version
    of the run's program: the run's program with the candidate's value (and the values of
    the candidates proposed with it), no stored candidates.

    Raises:
        CandidateVersionError: the run is still active, or the candidate does not fit the
            program any more.
    """
    if run.is_active:
        raise CandidateVersionError(
            f"Run #{run.pk} is still {run.get_status_display().lower()}: wait for it to end."
        )
    existing = ProgramVersion.objects.filter(source_candidate=candidate).first()
    if existing is not None:
        raise CandidateVersionError(
            f"Candidate {candidate.candidate_id} is already version {existing.number} of "
            f"“{run.program.name}”."
        )
    try:
        document = branching.branch_document(run, candidate, branching.Edits())
    except branching.BranchError as exc:
        raise CandidateVersionError(str(exc)) from None
    with transaction.atomic():
        program = Program.objects.select_for_update().get(pk=run.program_id)
        parent = run.program_version or program_versions.first_version(program)
        highest = program.versions.aggregate(top=Max("number"))["top"] or 1
        return ProgramVersion.objects.create(
            program=program,
            number=highest + 1,
            engine_json=document,
            source_run_number=run.pk,
            source_candidate=candidate,
            parent=parent,
            baseline_reward=run.baseline_reward,
        )
