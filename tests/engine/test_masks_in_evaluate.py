"""The guide's ``ExactMatch(out_mask=["thinking"])`` on a plain Generator.

Excluding a field that is not there is harmless: ``evaluate`` scores (with one warning);
an ``in_mask`` typo still stops with a message naming the field.
"""

import warnings

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import build_program, dataset, oracle_lm
from training.engine.masking import UnknownMaskFieldWarning


async def test_out_mask_of_a_field_a_plain_generator_lacks_evaluates_and_warns_once():
    program = await build_program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(out_mask=["thinking"]))
    x, y = dataset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await program.evaluate(x, y, batch_size=3)
        await program.evaluate(x, y, batch_size=3)
    assert result["reward"] == 1.0
    mask_warnings = [w for w in caught if issubclass(w.category, UnknownMaskFieldWarning)]
    assert len(mask_warnings) == 1
    assert "'thinking'" in str(mask_warnings[0].message)
    assert "exact_match" in str(mask_warnings[0].message)


async def test_out_mask_of_a_field_that_exists_does_not_warn():
    program = await build_program(oracle_lm(), module=synalinks.ChainOfThought)
    program.compile(reward=synalinks.rewards.ExactMatch(out_mask=["thinking"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownMaskFieldWarning)
        result = await program.evaluate(*dataset(4), batch_size=4)
    assert set(result) == {"reward"}


async def test_in_mask_naming_an_unknown_field_still_stops_evaluate():
    program = await build_program(oracle_lm())
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["anwser"]))
    with pytest.raises(ValueError, match="in_mask names unknown field.*'anwser'"):
        await program.evaluate(*dataset(2), batch_size=2)
