"""Modules: the building blocks of programs."""

from training.engine.modules.chain_of_thought import ChainOfThought
from training.engine.modules.generator import Generator
from training.engine.modules.module import Module, SchemaMismatchError

__all__ = ["ChainOfThought", "Generator", "Module", "SchemaMismatchError"]
