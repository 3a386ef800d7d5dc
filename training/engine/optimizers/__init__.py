"""Optimizers: update trainable variables to maximise the reward."""

from training.engine.optimizers.calibrated_labels import CalibratedLabels
from training.engine.optimizers.nearest_few_shot import NearestFewShot
from training.engine.optimizers.omega import OMEGA
from training.engine.optimizers.optimizer import Optimizer
from training.engine.optimizers.random_few_shot import RandomFewShot

__all__ = ["OMEGA", "CalibratedLabels", "NearestFewShot", "Optimizer", "RandomFewShot"]
