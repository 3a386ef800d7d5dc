"""Rewards: the quantity training maximises, always a float in [0, 1].

``synalinks.rewards.ExactMatch(in_mask=["answer"])`` and friends; see
``docs/ARCHITECTURE.md`` for the shared ``Reward`` interface.
"""

from training.engine.rewards.cosine_similarity import CosineSimilarity
from training.engine.rewards.exact_match import ExactMatch
from training.engine.rewards.human_marks import HumanMarks, attach_inputs
from training.engine.rewards.judging import JudgeInput, JudgeScore
from training.engine.rewards.lm_as_judge import LMAsJudge
from training.engine.rewards.mean_reward_wrapper import MeanRewardWrapper
from training.engine.rewards.program_as_judge import ProgramAsJudge
from training.engine.rewards.reward import Reward
from training.engine.scoring import get_scorer


def get(identifier):
    """A Reward from an instance, a registered name/config, or a registered async function."""
    return get_scorer(identifier, Reward, MeanRewardWrapper)


__all__ = [
    "CosineSimilarity",
    "ExactMatch",
    "HumanMarks",
    "JudgeInput",
    "JudgeScore",
    "LMAsJudge",
    "MeanRewardWrapper",
    "ProgramAsJudge",
    "Reward",
    "attach_inputs",
    "get",
]
