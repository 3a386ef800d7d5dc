"""A trained program exported as plain prompts re-scores its test split alone, as evaluate does.

The scripted models answer from what the prompt says (the system message, the example turns,
the label scores of the input), so a rendering that drifted from the Generator's would score
differently; the re-scorer gets only the export's JSON (dumped and read back), never the
program.
"""

from __future__ import annotations

import json

import pytest

import training.engine as synalinks
from tests.engine.optimizers.test_calibrated_labels import (
    Message,
    Route,
    arrays,
    noise_scores,
    program_on,
    rows,
    scorer_lm,
)
from training.engine.modules import prompt_rendering
from training.engine.optimizers import CalibratedLabels
from training.engine.saving import register_synalinks_serializable
from training.engine.saving.plain_prompt_scoring import (
    ExportError,
    check_export,
    comparison,
    rescore_plain_prompts,
)
from training.engine.saving.plain_prompts import FORMAT, export_plain_prompts
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel


class Review(synalinks.DataModel):
    review: str


class Verdict(synalinks.DataModel):
    label: str


REVIEWS = [
    ("great film, loved it", "positive"),
    ("awful, a waste", "negative"),
    ("loved the staff", "positive"),
    ("awful food", "negative"),
    ("great value", "positive"),
    ("cold and awful", "negative"),
    ("nothing special", "negative"),
    ("great fun", "positive"),
]


@register_synalinks_serializable(package="tests")
def reading_responder(request):
    """Right only when the prompt itself says enough: the instructions name the rule and at
    least two example turns precede the input; otherwise a constant answer."""
    system = request.messages[0]["content"]
    turns = [m for m in request.messages[1:-1] if m["role"] == "assistant"]
    review = json.loads(request.messages[-1]["content"])["review"]
    if "great or loved means positive" in system and len(turns) >= 2:
        return {"label": "positive" if ("great" in review or "loved" in review) else "negative"}
    return {"label": "positive"}


def review_arrays(data):
    x = [Review(review=text) for text, _ in data]
    y = [Verdict(label=label) for _, label in data]
    return x, y


async def review_program(instructions: str, examples: list) -> synalinks.Program:
    inputs = synalinks.Input(data_model=Review)
    outputs = await synalinks.Generator(
        data_model=Verdict,
        language_model=FakeLanguageModel(responder=reading_responder),
        instructions=instructions,
        examples=examples,
        description="Review sentiment",
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="reviews")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["label"]))
    return program


def reread(export: dict) -> dict:
    """The export as a file holds it: what the re-scorer is given."""
    return json.loads(json.dumps(export))


async def own_rewards(program, x, y) -> tuple[float, list[float]]:
    per_example = synalinks.callbacks.ExampleRewards()
    logs = await program.evaluate(x, y, callbacks=[per_example])
    return logs["reward"], list(per_example.rewards)


@pytest.mark.parametrize(
    ("instructions", "expected"),
    [("Answer. great or loved means positive.", 1.0), ("Answer.", 0.5)],
)
async def test_export_rescores_like_evaluate_for_instructions_and_examples(instructions, expected):
    examples = [
        ({"review": "great stuff"}, {"label": "positive"}),
        ({"review": "bad stuff"}, {"label": "negative"}),
    ]
    program = await review_program(instructions, examples)
    x, y = review_arrays(REVIEWS)
    own, own_each = await own_rewards(program, x, y)
    export = reread(export_plain_prompts(program))
    [module] = export["modules"]
    generator = program.modules[0]
    # the messages are the Generator's own, then the input as JSON
    assert module["messages"] == generator.prompt_prefix()
    assert prompt_rendering.filled_messages(
        module["messages"], {"review": "x"}
    ) == generator.format_messages({"review": "x"})
    assert module["examples"][0]["outputs"] == {"label": "positive"}
    assert module["language_model"]["config"]["model"] == "fake/scripted"
    assert "api_key" not in json.dumps(export)
    assert module["output_note"].startswith("Output: one JSON object (Verdict)")
    assert module["not_plain"] == [] and module["label_decision"] is None

    score = await rescore_plain_prompts(export, [r.get_json() for r in x], y, program.reward)
    assert own == pytest.approx(expected)
    assert score.reward == own and score.rewards == own_each
    assert score.not_reproduced == [] and score.drift == []
    assert comparison(score, own, len(x))["text"].endswith(": equal")


async def test_a_label_field_decided_from_scores_rescores_with_the_exported_decision():
    program = await program_on(scorer_lm(), CalibratedLabels(vote=False, seed=0))
    x, y = arrays(rows(60, seed=2))
    x_test, y_test = arrays(rows(30, seed=3))
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0)
    own, own_each = await own_rewards(program, x_test, y_test)
    export = reread(export_plain_prompts(program))
    [module] = export["modules"]
    decided = module["label_decision"]
    assert decided["field"] == "team" and decided["decided_from_scores"] is True
    assert set(decided["decision"]["bias"]) == {"money", "bug", "box"}
    assert "decided from every label's log-probability" in module["not_plain"][0]

    score = await rescore_plain_prompts(export, list(x_test), y_test, program.reward)
    assert own == 1.0  # the bias turned the biased scores right...
    assert score.reward == own and score.rewards == own_each  # ...and the export applied it

    # without the decision the same scores answer "bug" throughout: the decision is what counts
    module["label_decision"]["decision"] = None
    undecided = await rescore_plain_prompts(export, list(x_test), y_test, program.reward)
    assert undecided.reward == pytest.approx(1 / 3)
    assert "differs by -0.6667" in comparison(undecided, own, 30)["text"]


async def test_an_embedding_read_out_needs_its_model_and_says_so_without_it():
    optimizer = CalibratedLabels(embedding_model=FakeEmbeddingModel(), seed=0)
    program = await program_on(scorer_lm(noise_scores), optimizer)
    x, y = arrays(rows(60, seed=4))
    x_test, y_test = arrays(rows(30, seed=5))
    await program.fit(x, y, validation_split=0.25, epochs=1, batch_size=8, seed=0)
    program.modules[0].embedding_model = FakeEmbeddingModel()
    own, _ = await own_rewards(program, x_test, y_test)
    export = reread(export_plain_prompts(program))
    assert any("embedding read-out" in note for note in export["modules"][0]["not_plain"])

    with_model = await rescore_plain_prompts(export, list(x_test), y_test, program.reward)
    assert with_model.reward == own and with_model.not_reproduced == []

    export["modules"][0]["embedding_model"] = None  # as if only its name were known
    without = await rescore_plain_prompts(export, list(x_test), y_test, program.reward)
    assert "not available here: decided without it" in without.not_reproduced[0]
    text = comparison(without, own, 30)["text"]
    assert ("equal" in text) if without.reward == own else ("read-out needs" in text)


async def test_the_export_names_its_format_and_a_broken_one_is_refused():
    program = await review_program("Answer.", [])
    export = reread(export_plain_prompts(program))
    assert export["format"] == FORMAT and export["graph"][0]["inputs"] == ["input:0"]
    check_export(export)
    for broken, message in [
        ({**export, "format": "synalinks-program"}, "format"),
        ({**export, "version": 99}, "version"),
        ({**export, "graph": [{"module": "nobody", "inputs": ["input:0"]}]}, "names one of"),
        (
            {**export, "modules": [{**export["modules"][0], "messages": []}]},
            "list of 1 to",
        ),
        (
            {
                **export,
                "modules": [
                    {**export["modules"][0], "messages": [{"role": "tool", "content": "x"}]}
                ],
            },
            "known role",
        ),
    ]:
        with pytest.raises(ExportError, match=message):
            check_export(broken)


async def test_a_chain_of_two_generators_rescores_through_the_exported_graph():
    class Note(synalinks.DataModel):
        note: str

    lm = FakeLanguageModel()
    inputs = synalinks.Input(data_model=Message)
    first = await synalinks.Generator(data_model=Note, language_model=lm, name="noter")(inputs)
    second = await synalinks.Generator(data_model=Route, language_model=lm, name="router")(
        [inputs, first]
    )
    program = synalinks.Program(inputs=inputs, outputs=second, name="chain")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]))
    x, y = arrays(rows(6, seed=1))
    own, own_each = await own_rewards(program, x, y)
    export = reread(export_plain_prompts(program))
    assert [node["inputs"] for node in export["graph"]] == [["input:0"], ["input:0", "node:0"]]
    score = await rescore_plain_prompts(export, list(x), y, program.reward)
    assert score.rewards == own_each and score.reward == own
