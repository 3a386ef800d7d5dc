"""Callbacks: hooks into fit / evaluate / predict and the structured event stream."""

from training.engine.callbacks.callback import Callback, CallbackList
from training.engine.callbacks.early_stopping import EarlyStopping
from training.engine.callbacks.example_rewards import ExampleRewards
from training.engine.callbacks.program_checkpoint import ProgramCheckpoint
from training.engine.callbacks.progress_bar import ProgressBar
from training.engine.callbacks.remote_monitor import RemoteMonitor

__all__ = [
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "ExampleRewards",
    "ProgramCheckpoint",
    "ProgressBar",
    "RemoteMonitor",
]
