"""Trainboard's training engine: a pure-Python re-implementation of the Synalinks API.

``import training.engine as synalinks`` runs the snippets of the training guide. Never imports
Django. litellm's cost map is read from the local copy (no network at import); litellm itself
is imported lazily, on the first real LM call.

The offline ``local/…`` models are a provider outside the engine (``trainboard_local``, the
``local`` extra), built on it: the engine never imports it, it finds it through
``language_models.offline`` (an installed entry point, or a loader its runner registers).
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from training.engine import (  # noqa: E402
    callbacks,
    datasets,
    metrics,
    optimizers,
    rewards,
    saving,
    testing,
    utils,
)
from training.engine.data_model import (  # noqa: E402
    DataModel,
    create_data_model,
    data_model_from_schema,
)
from training.engine.language_models import tracing, usage  # noqa: E402
from training.engine.language_models.budget import BudgetExhausted, CallBudget  # noqa: E402
from training.engine.language_models.embedding_model import EmbeddingModel  # noqa: E402
from training.engine.language_models.language_model import (  # noqa: E402
    LanguageModel,
    LanguageModelConfigError,
    LanguageModelError,
    LanguageModelUnreachable,
)
from training.engine.modules import ChainOfThought, Generator, Module  # noqa: E402
from training.engine.program import Program, Sequential  # noqa: E402
from training.engine.symbolic import Input  # noqa: E402
from training.engine.trainers.history import History  # noqa: E402
from training.engine.variables import Variable  # noqa: E402

__all__ = [
    "BudgetExhausted",
    "CallBudget",
    "ChainOfThought",
    "DataModel",
    "EmbeddingModel",
    "Generator",
    "History",
    "Input",
    "LanguageModel",
    "LanguageModelConfigError",
    "LanguageModelError",
    "LanguageModelUnreachable",
    "Module",
    "Program",
    "Sequential",
    "Variable",
    "callbacks",
    "create_data_model",
    "data_model_from_schema",
    "datasets",
    "metrics",
    "optimizers",
    "rewards",
    "saving",
    "testing",
    "tracing",
    "usage",
    "utils",
]
