"""A ``fit`` in a process of its own, streamed to a dashboard with ``RemoteMonitor``: what a
user's notebook does, for the tests and the API bench.

``python -m tests.support.code_fit URL TOKEN [--gate FILE] [--epochs N] [--rows N]``
evaluates, fits and evaluates again a one-module program on a scripted model, then prints
the run's URL. The model is a litellm provider of this process (``fake/echo`` here answers
right for the questions it knows, in no time): the program is a plain ``LanguageModel``, so
the dashboard takes its JSON as it takes any program's (the test stack knows ``fake/echo``
as a model string too). With ``--gate``, it stops after the first batch of its second epoch
until FILE exists, so a test can look at the run mid-fit. ``--model local/smollm2`` fits on the real
local model instead (what a dashboard started by ``make run`` accepts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path

import litellm
import numpy as np
from litellm import CustomLLM

import training.engine as synalinks
from training.engine.language_models import offline

# From a clone the offline models are found through a registration (an installed engine
# finds them through its entry point): what ``--model local/smollm2`` needs.
offline.register_module("trainboard_local")

KNOWN = {f"question {i}": f"answer {i}" for i in range(0, 400, 2)}


MODEL = "fake/echo"


class Scripted(CustomLLM):
    """Answers the question in the last message: right when it is known, else "unknown"."""

    async def acompletion(self, model, messages, model_response, optional_params, **_unused):
        asked = re.findall(r'"question": "([^"]*)"', str(messages[-1].get("content", "")))
        answer = KNOWN.get(asked[-1], "unknown") if asked else "unknown"
        model_response.choices[0].message.content = json.dumps({"answer": answer})
        model_response.usage = litellm.Usage(prompt_tokens=20, completion_tokens=5, total_tokens=25)
        return model_response


def register() -> None:
    if not any(item.get("provider") == "fake" for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": "fake", "custom_handler": Scripted()},
        ]


class Question(synalinks.DataModel):
    question: str


class Answer(synalinks.DataModel):
    answer: str


class Gate(synalinks.callbacks.Callback):
    """Holds the fit after the first batch of its second epoch until ``path`` exists: its
    first epoch is done and its second under way."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    async def on_event(self, event):
        if event.get("type") == "batch_end" and (event["epoch"], event["batch"]) == (1, 0):
            await asyncio.to_thread(self._wait)

    def _wait(self) -> None:
        deadline = time.monotonic() + 120
        while not self.path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # a file is the one signal another process can give here


def rows(count: int, offset: int = 0):
    questions = [f"question {offset + i}" for i in range(count)]
    x = np.array([Question(question=q) for q in questions], dtype="object")
    y = np.array(
        [Answer(answer=KNOWN.get(q, f"answer {offset + i}")) for i, q in enumerate(questions)],
        dtype="object",
    )
    return x, y


async def build(model_name: str = MODEL) -> synalinks.Program:
    register()
    model = synalinks.LanguageModel(model=model_name)
    inputs = synalinks.Input(data_model=Question)
    outputs = await synalinks.Generator(data_model=Answer, language_model=model)(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="questions from code")
    program.compile(
        reward=synalinks.rewards.ExactMatch(in_mask=["answer"]),
        optimizer=synalinks.optimizers.RandomFewShot(nb_candidates=2),
    )
    return program


async def main(args: argparse.Namespace) -> None:
    program = await build(args.model)
    monitor = synalinks.callbacks.RemoteMonitor(url=args.url, token=args.token)
    callbacks: list = [monitor]
    if args.gate:
        callbacks.append(Gate(Path(args.gate)))
    x_train, y_train = rows(args.rows)
    x_test, y_test = rows(10, offset=args.rows)
    await program.evaluate(x_test, y_test, batch_size=5, callbacks=[monitor])
    await program.fit(
        x_train, y_train, epochs=args.epochs, batch_size=4, seed=3, callbacks=callbacks
    )
    await program.evaluate(x_test, y_test, batch_size=5, callbacks=[monitor])
    print(monitor.run_url, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("token")
    parser.add_argument("--gate", default="")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--model", default=MODEL, help="e.g. local/smollm2 (a real model)")
    asyncio.run(main(parser.parse_args()))
