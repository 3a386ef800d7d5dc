"""The question-answering program the engine benches time (not a benchmark itself): ``Query``
in, ``Answer`` out through one Generator. ``engine_overhead.py`` and ``trace_overhead.py``
import it, after putting the project root on ``sys.path``."""

from __future__ import annotations

import training.engine as synalinks


class Query(synalinks.DataModel):
    query: str


class Answer(synalinks.DataModel):
    answer: str


async def query_answer_program(lm, **options):
    """A Query -> Answer program through one Generator on ``lm``; ``options`` go to the
    Generator (``instructions``, ``examples``): each bench times its own prompt."""
    inputs = synalinks.Input(data_model=Query)
    outputs = await synalinks.Generator(data_model=Answer, language_model=lm, **options)(inputs)
    return synalinks.Program(inputs=inputs, outputs=outputs)
