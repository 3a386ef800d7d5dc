"""NearestFewShot on the offline models (`local/smollm2` + `local/minilm`): fit, evaluate,
save and load a small label task (the built-in demo dataset's first rows)."""

import json
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from pydantic import Field

import training.engine as synalinks
from training.engine.optimizers import NearestFewShot

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[3] / "datasets" / "builtin" / "demo" / "data.jsonl"


class Message(synalinks.DataModel):
    message: str = Field(description="A customer's message.")


class Route(synalinks.DataModel):
    team: Literal["money", "bug", "box"] = Field(description="The team code for the message.")


def arrays(rows):
    x = np.array([Message(message=r["message"]) for r in rows], dtype="object")
    y = np.array([Route(team=r["team"]) for r in rows], dtype="object")
    return x, y


async def test_nearest_few_shot_fit_evaluate_save_load_on_the_local_model(tmp_path):
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    train, test = rows[:24], rows[24:36]
    lm = synalinks.LanguageModel(model="local/smollm2", temperature=0.0, max_tokens=32)
    em = synalinks.EmbeddingModel(model="local/minilm")
    inputs = synalinks.Input(data_model=Message)
    outputs = await synalinks.Generator(
        data_model=Route,
        language_model=lm,
        instructions="Route the customer's message to the team that handles it.",
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="local_nearest")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["team"]),
        optimizer=NearestFewShot(embedding_model=em, k=4, seed=0),
    )
    x, y = arrays(train)
    x_test, y_test = arrays(test)
    before = await program.evaluate(x_test, y_test, batch_size=6)
    history = await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=6, seed=0)
    after = await program.evaluate(x_test, y_test, batch_size=6)
    pool = program.trainable_variables[0].value["retrieval"]["pool"]
    assert len(pool) == 18  # the training part: 24 rows less the validation quarter
    assert history.usage["embedding_calls"] == 1 + 6  # the pool once, each validation row once
    # the codes (money/bug/box) cannot be guessed: the nearest examples teach them
    assert after["reward"] >= before["reward"] + 0.25
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = synalinks.Program.load(str(path))
    some = x_test[:4]  # the retrieval and its examples are in the file: a few rows tell
    assert [p.get_json() for p in await loaded.predict(some, batch_size=4)] == [
        p.get_json() for p in await program.predict(some, batch_size=4)
    ]
