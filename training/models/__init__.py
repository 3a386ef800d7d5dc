"""The training app's models: programs, runs and what a run produces.

One module a concept: ``programs`` (programs, their versions, endpoints), ``runs`` (a run and
its tags), ``checkpoints`` (where a run resumes from), ``hand_candidates`` (the candidates
people queue for a live population), ``records`` (what a run stores while it trains: epoch
logs, candidates, evaluations, call traces), ``serving`` (what a served program answered),
``follow_ups`` (ablations and judge re-scores of a finished run) and ``model_pace`` (what
finished runs observed of a model, for the forecast). Every model is importable from here, as
Django and the rest of the code expect (``training.models.Run``).
"""

from training.models.checkpoints import RunCheckpoint
from training.models.follow_ups import Ablation, RescoreJob
from training.models.hand_candidates import HandCandidate
from training.models.model_pace import ModelPace
from training.models.programs import Endpoint, Program, ProgramVersion
from training.models.records import (
    Candidate,
    EpochLog,
    Evaluation,
    EvaluationExample,
    LMCallTrace,
    OptimizerError,
)
from training.models.runs import Run, RunTag
from training.models.serving import ServedCall

__all__ = [
    "Ablation",
    "Candidate",
    "Endpoint",
    "EpochLog",
    "Evaluation",
    "EvaluationExample",
    "HandCandidate",
    "LMCallTrace",
    "ModelPace",
    "OptimizerError",
    "Program",
    "ProgramVersion",
    "RescoreJob",
    "Run",
    "RunCheckpoint",
    "RunTag",
    "ServedCall",
]
