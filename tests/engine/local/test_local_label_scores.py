"""Label scores on the real local model (``local/label_scores.py``): each label's whole continuation
scored after the prompt and the answer's opening, the prompt evaluated once.

The reference evaluates, on a fresh instance that keeps every position's logits, the prompt
with the opening, then each label's tokens but its last, in the batches the decoder makes
(llama.cpp picks its matrix kernels by a batch's size, and on some CPUs two kernels differ
by 0.01 in a log-probability); the decoder's scores are the same sums of log-probabilities,
whatever its instance held before, and the same on every call.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import training.engine as synalinks
from trainboard_local import label_scores, smollm2
from trainboard_local.decoding import Decoder
from training.engine.language_models import label_scoring

pytestmark = pytest.mark.slow

LABELS = ["negative", "neutral", "positive"]
MESSAGES = [
    {
        "role": "system",
        "content": "Classify the sentiment of the tweet: negative, neutral or positive.",
    },
    {"role": "user", "content": '{"text": "What a wonderful day, I love it!"}'},
]


@pytest.fixture(scope="module")
def llamas():
    import llama_cpp

    def load(logits_all: bool):
        return llama_cpp.Llama(
            model_path=str(smollm2.model_path()),
            n_ctx=1024,
            n_threads=1,
            n_threads_batch=1,
            logits_all=logits_all,
            verbose=False,
        )

    made = [load(True), load(False)]
    yield made
    for llama in made:
        llama.close()


def reference_scores(llama, decoder) -> list[float]:
    prompt = decoder.prompt_tokens(MESSAGES)
    opening = llama.tokenize(label_scoring.opening("label").encode(), False, False)
    found = []
    for label in LABELS:
        piece = llama.tokenize(label_scoring.continuation(label).encode(), False, False)
        llama.reset()
        llama.eval(prompt + opening)
        if len(piece) > 1:  # the last token's logits are never read
            llama.eval(piece[:-1])
        logits = np.asarray(llama.scores[: llama.n_tokens], dtype=np.float64)
        start = len(prompt) + len(opening)
        total = 0.0
        for offset, token in enumerate(piece):
            row = logits[start + offset - 1]
            row = row - row.max()
            total += float(row[token] - np.log(np.exp(row).sum()))
        found.append(total)
    return found


def test_each_labels_score_is_its_whole_continuations_log_probability(llamas):
    reference, scoring = llamas
    decoder = Decoder(scoring)
    expected = reference_scores(reference, decoder)
    opening = label_scoring.opening("label")
    continuations = [label_scoring.continuation(label) for label in LABELS]
    first = label_scores.score(decoder, MESSAGES, opening, continuations)
    again = label_scores.score(decoder, MESSAGES, opening, continuations)  # prompt held
    decoder.held = []
    fresh = label_scores.score(decoder, MESSAGES, opening, continuations)
    assert first["scores"] == again["scores"] == fresh["scores"]
    np.testing.assert_allclose(first["scores"], expected, atol=1e-4)
    assert again["usage"]["prompt_tokens_evaluated"] < first["usage"]["prompt_tokens_evaluated"]
    assert LABELS[int(np.argmax(first["scores"]))] == "positive"


class Tweet(synalinks.DataModel):
    text: str


class Sentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"]


async def test_a_local_generator_decides_its_label_field_from_one_scoring_call():
    lm = synalinks.LanguageModel(model="local/smollm2")
    inputs = synalinks.Input(data_model=Tweet)
    program = synalinks.Program(
        inputs=inputs,
        outputs=await synalinks.Generator(
            data_model=Sentiment,
            language_model=lm,
            instructions="Classify the sentiment of the tweet.",
        )(inputs),
    )
    with synalinks.usage.track() as usage:
        [answer] = await program.predict([Tweet(text="What a wonderful day, I love it!")])
    assert answer.get_json() == {"label": "positive"}
    assert usage.calls == 1
