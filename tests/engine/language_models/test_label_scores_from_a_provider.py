"""A provider's log-probabilities score a label field (a real OpenAI-compatible HTTP server).

The server answers ``{"label": "positive"}`` and, when asked, the per-token log-probabilities
of that answer, the token where the value starts with its alternatives. The label decided is
the best-scored one after the decision (here a bias), not only the sampled one; a server that
sends no log-probabilities leaves the label sampled, with no second request; one that refuses
them has the label sampled, and one answer whose value cannot be found in its tokens (fenced)
stands as sampled while the next is scored again.
"""

from __future__ import annotations

from typing import Literal

import pytest

import training.engine as synalinks
from tests.openai_server import OpenAIServer

ANSWER = '{"label": "positive"}'
#: OpenAI's shape: the tokens of ANSWER, the value's first token with its alternatives
TOKENS = [
    {"token": '{"', "logprob": -0.01, "top_logprobs": []},
    {"token": "label", "logprob": -0.01, "top_logprobs": []},
    {"token": '":', "logprob": -0.01, "top_logprobs": []},
    {"token": ' "', "logprob": -0.01, "top_logprobs": []},
    {
        "token": "pos",
        "logprob": -0.4,
        "top_logprobs": [
            {"token": "pos", "logprob": -0.4},
            {"token": "neg", "logprob": -1.3},
            {"token": "neut", "logprob": -2.9},
        ],
    },
    {"token": "itive", "logprob": -0.01, "top_logprobs": []},
    {"token": '"}', "logprob": -0.01, "top_logprobs": []},
]


class Tweet(synalinks.DataModel):
    text: str


class Sentiment(synalinks.DataModel):
    label: Literal["negative", "neutral", "positive"]


async def generator_on(server, decision=None):
    lm = synalinks.LanguageModel(
        model="openai/test-model", api_base=server.api_base, api_key="k", retries=0
    )
    inputs = synalinks.Input(data_model=Tweet)
    generator = synalinks.Generator(data_model=Sentiment, language_model=lm)
    program = synalinks.Program(inputs=inputs, outputs=await generator(inputs))
    if decision:
        value = program.trainable_variables[0].value
        program.trainable_variables[0].assign({**value, "decision": decision})
    return program, lm


async def test_the_providers_logprobs_score_every_label():
    with OpenAIServer(limit=4, latency=0.0, content=ANSWER, logprobs=TOKENS) as server:
        program, lm = await generator_on(server)
        messages = [{"role": "user", "content": '{"text": "meh"}'}]
        labels = ["negative", "neutral", "positive"]
        scores = (await lm.score_labels(messages, Sentiment, "label", labels)).scores
        assert scores[0] == pytest.approx(-1.3)
        assert scores[1] == pytest.approx(-2.9)
        assert scores[2] == pytest.approx(-0.4, abs=1e-5)
        assert server.bodies[-1]["logprobs"] is True and server.bodies[-1]["top_logprobs"] == 20


async def test_a_bias_can_turn_the_providers_answer():
    decision = {"field": "label", "bias": {"negative": 1.5}, "lm_weight": 1.0, "vote_weight": 0}
    with OpenAIServer(limit=4, latency=0.0, content=ANSWER, logprobs=TOKENS) as server:
        program, _ = await generator_on(server, decision)
        [answer] = await program.predict([Tweet(text="meh")])
        assert answer.get_json() == {"label": "negative"}
        assert len(server.bodies) == 1


async def test_a_provider_without_logprobs_leaves_the_label_sampled():
    with OpenAIServer(limit=4, latency=0.0, content=ANSWER) as server:
        program, lm = await generator_on(server)
        answers = await program.predict([Tweet(text="a"), Tweet(text="b")])
        assert [a.get_json() for a in answers] == [{"label": "positive"}] * 2
        # each answered the scoring request without scores: that answer stands, once each,
        # and the model samples from then on
        assert lm.can_score_labels() is False
        assert len(server.bodies) == 2
        [third] = await program.predict([Tweet(text="c")])
        assert third.get_json() == {"label": "positive"} and len(server.bodies) == 3
        assert "logprobs" not in server.bodies[-1]


async def test_a_provider_that_refuses_logprobs_gets_sampled_requests():
    with OpenAIServer(limit=4, latency=0.0, content=ANSWER, refuse_logprobs=True) as server:
        program, lm = await generator_on(server)
        [first] = await program.predict([Tweet(text="a")])
        [second] = await program.predict([Tweet(text="b")])
        assert [first.get_json(), second.get_json()] == [{"label": "positive"}] * 2
        assert lm.can_score_labels() is False
        # scores asked once (refused with a 400), then each answer sampled
        assert [("logprobs" in body) for body in server.bodies] == [True, False, False]


async def test_an_answer_the_scores_cannot_place_leaves_scoring_on():
    fenced = f"```json\n{ANSWER}\n```"
    with OpenAIServer(limit=4, latency=0.0, content=fenced, logprobs=TOKENS) as server:
        program, lm = await generator_on(server)
        answers = await program.predict([Tweet(text="a"), Tweet(text="b")])
        assert [a.get_json() for a in answers] == [{"label": "positive"}] * 2
        assert lm.can_score_labels() is True
        assert [body["logprobs"] for body in server.bodies] == [True, True]
