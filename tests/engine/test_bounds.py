"""Each engine limit is declared once (``PARAMETERS``, ``training.engine.bounds``) and the
constructors and ``fit`` enforce exactly that declaration, with messages naming the
parameter, the value and what is allowed."""

from __future__ import annotations

import pytest

from tests.engine.helpers_engine import build_program, dataset
from tests.engine.trainers.test_fit import compiled, oracle_lm
from training.engine import bounds
from training.engine.optimizers import OMEGA, Optimizer, RandomFewShot, dns
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


def omega(**kwargs):
    return OMEGA(language_model=FakeLanguageModel(), embedding_model=FakeEmbeddingModel(), **kwargs)


@pytest.mark.parametrize(
    ("bound", "inside", "outside"),
    [
        (bounds.IntRange(2, 5), [2, 5], [1, 6, 2.0, True, "3", None]),
        (bounds.IntRange(1), [1, 10**9], [0, -1]),
        (bounds.FloatRange(0.0, 0.95), [0, 0.0, 0.95], [-0.01, 0.96, float("nan"), False]),
        (bounds.Choice(("dns", "ga")), ["dns", "ga"], ["DNS", None]),
    ],
)
def test_a_bound_accepts_its_closed_range_and_nothing_else(bound, inside, outside):
    for value in inside:
        assert bound.problem(value) is None
        assert bound.check("x", value) == value
    for value in outside:
        with pytest.raises(bounds.ParameterError) as raised:
            bound.check("x", value)
        assert raised.value.errors == {"x": f"must be {bound.describe()}, got {value!r}"}


def test_population_of_one_is_refused_by_omega_and_by_the_competition():
    with pytest.raises(ValueError, match="OMEGA: population_size must be a whole number between 2"):
        omega(population_size=1)
    with pytest.raises(ValueError, match="population_size"):
        dns.competition([1.0, 0.5], [1.0, 1.0], 1)
    with pytest.raises(ValueError, match="population_size"):
        dns.elitism([1.0, 0.5], 1)
    assert omega(population_size=2).population_size == 2


def test_every_bad_parameter_is_reported_at_once():
    bad = dict(population_size=0, merging_rate=2, selection_temperature=0, k_nearest_fitter=0)
    with pytest.raises(bounds.ParameterError) as raised:
        omega(algorithm="nsga", **bad)
    assert set(raised.value.errors) == {"algorithm", *bad}
    assert str(raised.value).startswith("OMEGA: ")


def test_constructors_check_exactly_their_declared_bounds():
    assert set(RandomFewShot.PARAMETERS) == {
        "few_shot_learning",  # a Flag: described (help), never limited
        "nb_min_examples",
        "nb_max_examples",
        "nb_candidates",
    }
    assert set(Optimizer.PARAMETERS) < set(OMEGA.PARAMETERS)
    for name, bound in OMEGA.PARAMETERS.items():
        if isinstance(bound, bounds.IntRange | bounds.FloatRange):
            others = {"nb_min_examples": 0} if name == "nb_max_examples" else {}
            omega(**{name: bound.min}, **others)  # the edge is allowed...
            below = bound.min - (1 if isinstance(bound, bounds.IntRange) else 0.001)
            with pytest.raises(bounds.ParameterError, match=name):
                omega(**{name: below}, **others)  # ...and one step beyond is not
    with pytest.raises(bounds.ParameterError, match="nb_candidates"):
        RandomFewShot(nb_candidates=0)
    with pytest.raises(bounds.ParameterError, match=r"at least nb_min_examples \(3\), got 1"):
        RandomFewShot(nb_min_examples=3, nb_max_examples=1)


def test_defaults_are_read_from_the_signature():
    assert bounds.defaults(RandomFewShot) == {
        "few_shot_learning": False,
        "nb_min_examples": 1,
        "nb_max_examples": 3,
        "nb_candidates": 1,
        "seed": None,
        "name": None,
    }


async def test_fit_checks_its_arguments_against_the_declared_bounds():
    program = compiled(await build_program(oracle_lm()))
    x, y = dataset()
    top = bounds.VALIDATION_SPLIT.max
    with pytest.raises(bounds.ParameterError, match="validation_split must be a number between"):
        await program.fit(x, y, validation_split=top + 0.01)
    with pytest.raises(bounds.ParameterError, match="epochs"):
        await program.fit(x, y, epochs=0)
    with pytest.raises(bounds.ParameterError, match="batch_size"):
        await program.fit(x, y, batch_size=0)
