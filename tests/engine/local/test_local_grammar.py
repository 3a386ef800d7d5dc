"""Bounded grammars for `local/smollm2`: the JSON always closes before max_tokens.

The fast tests check the schema arithmetic and the grammar text; the slow ones run the real
model on prompts that make it ramble, with small max_tokens, and require closed, valid JSON.
"""

import json

import jsonschema
import pytest

pytest.importorskip("llama_cpp")

import trainboard_local  # noqa: E402
from trainboard_local import grammar  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def local_provider():
    """litellm knows the ``local`` provider, as after the engine's first local request."""
    trainboard_local.register()


RAMBLING = {
    "type": "object",
    "properties": {
        "thinking": {"type": "string", "maxLength": 5000},
        "essay": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "year": {"type": "integer"},
    },
    "required": ["thinking", "essay", "tags", "year"],
}


def test_every_string_and_array_gets_a_bound_that_fits_the_budget():
    bounded, fits = grammar.bound_schema(RAMBLING, 300)
    props = bounded["properties"]
    assert fits
    assert all(
        props[name]["maxLength"] >= grammar.MIN_STRING_CHARS for name in ("thinking", "essay")
    )
    assert props["tags"]["maxItems"] == grammar.DEFAULT_MAX_ITEMS
    strings = props["thinking"]["maxLength"] + props["essay"]["maxLength"]
    strings += props["tags"]["maxItems"] * props["tags"]["items"]["maxLength"]
    assert strings < 300
    assert RAMBLING["properties"]["essay"] == {"type": "string"}  # the input is not modified


def test_a_roomy_budget_keeps_the_callers_own_bounds_and_min_lengths():
    schema = {
        "type": "object",
        "properties": {
            "short": {"type": "string", "maxLength": 20},
            "long": {"type": "string", "minLength": 50},
        },
        "required": ["short", "long"],
    }
    bounded, fits = grammar.bound_schema(schema, 4000, chars_per_token=2.0)
    assert fits
    assert bounded["properties"]["short"]["maxLength"] == 20
    assert bounded["properties"]["long"]["maxLength"] > 1000
    tight, fits = grammar.bound_schema(schema, 40)
    assert tight["properties"]["long"]["maxLength"] == 50  # never below minLength
    assert not fits


def test_refs_are_inlined_and_free_form_objects_are_reported_unbounded():
    schema = {
        "type": "object",
        "$defs": {"Name": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/Name"}, "meta": {"type": "object"}},
        "required": ["a", "meta"],
    }
    bounded, fits = grammar.bound_schema(schema, 200)
    assert "maxLength" in bounded["properties"]["a"] and not fits


def test_large_bounds_use_llama_cpp_repetition_not_nested_groups():
    text, _ = grammar.grammar_text(json.dumps(RAMBLING), None)
    assert "char{0,5000}" in text and "(char (char" not in text
    text, _ = grammar.grammar_text(json.dumps(RAMBLING), 100)
    assert "tags-item (" in text and "{0,7}" in text


def test_whitespace_between_json_tokens_is_json_dumps_layout():
    text, _ = grammar.grammar_text(json.dumps(RAMBLING), 200)
    assert 'space ::= ""' in text
    assert '":" " "' in text and '"," " "' in text
    assert '":" space' not in text and '"," space' not in text


# -- real model ----------------------------------------------------------------------------


def _format(schema):
    return {"type": "json_schema", "json_schema": {"name": "Essay", "schema": schema}}


@pytest.mark.slow
@pytest.mark.parametrize("max_tokens", [60, 150])  # the skeleton alone needs ~50
async def test_rambling_answer_still_closes_within_max_tokens(litellm, max_tokens):
    response = await litellm.acompletion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Write a very long essay on the history of trains."}],
        response_format=_format(RAMBLING),
        max_tokens=max_tokens,
        temperature=0.9,
        seed=7,
        num_retries=0,
    )
    content = response.choices[0].message.content
    jsonschema.validate(json.loads(content), RAMBLING)  # closed, and valid for the caller
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens <= 2 * max_tokens  # at most the one strict retry


@pytest.mark.slow
async def test_max_length_reaches_the_grammar(litellm):
    schema = {
        "type": "object",
        "properties": {
            "thinking": {"type": "string", "maxLength": 30},
            "answer": {"type": "string"},
        },
        "required": ["thinking", "answer"],
    }
    response = await litellm.acompletion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Explain in great detail how a steam engine works."}],
        response_format=_format(schema),
        max_tokens=400,
        temperature=0.9,
        seed=3,
        num_retries=0,
    )
    value = json.loads(response.choices[0].message.content)
    assert len(value["thinking"]) <= 30
    jsonschema.validate(value, schema)


@pytest.mark.slow
def test_a_grammar_llama_cpp_refuses_is_an_error_not_a_crash():
    from trainboard_local import smollm2

    decoder = smollm2._get_pool().take()
    try:
        with pytest.raises(ValueError, match="refused"):
            grammar.check_grammar(decoder.llama, 'root ::= "a" undefined-rule')
        grammar.check_grammar(decoder.llama, 'root ::= "a"{0,3000}')  # accepted
    finally:
        smollm2._get_pool().give_back(decoder)
