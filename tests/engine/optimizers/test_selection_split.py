"""``fit(selection_split=...)`` (an extension of the guide): rows held out from training and
validation decide the final program among the top validation candidates, so a candidate that
was only lucky on validation is not kept; every scored candidate's event carries its
per-example rewards and its prediction calls' prompt tokens and latency."""

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA, final_selection
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

QUESTIONS = list(TRUTH)
# 10 rows: selection_split 0.3 holds out the last 3; validation_split 0.3 of the 7 left takes
# rows 5 and 6; rows 0..4 train.
SELECTION_ROWS = QUESTIONS[7:]
VALIDATION_ROWS = QUESTIONS[5:7]


def respond(request):
    """ "Lucky" knows the validation rows only; "Answer exactly" knows everything but one
    validation row; anything else knows nothing."""
    question = request.inputs["query"]
    if "lucky" in request.instructions.lower():
        right = question in VALIDATION_ROWS
    elif "answer exactly" in request.instructions.lower():
        right = question != VALIDATION_ROWS[1]
    else:
        right = False
    return {"answer": TRUTH[question] if right else "unknown"}


def mutations(texts):
    calls = {"n": 0}

    def mutate(request):
        calls["n"] += 1
        return {"thinking": "t", "instructions": texts[(calls["n"] - 1) % len(texts)]}

    return FakeLanguageModel(responder=mutate)


async def fit(selection_split):
    optimizer = OMEGA(
        language_model=mutations(["Lucky guess please.", "Answer exactly, please."]),
        embedding_model=FakeEmbeddingModel(),
        seed=0,
    )
    program = await build_program(FakeLanguageModel(responder=respond))
    program.variables[0].assign({"instructions": "Start here.", "examples": []})
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x, y = dataset()
    if not selection_split:  # the same training and validation rows, nothing held out
        x, y = x[:7], y[:7]
    recorder = EventRecorder()
    history = await program.fit(
        x,
        y,
        validation_split=0.3,
        selection_split=selection_split,
        epochs=2,
        batch_size=4,
        seed=0,
        callbacks=[recorder],
    )
    return program, recorder, history


def instructions(program):
    return program.variables[0].value["instructions"]


async def test_without_a_selection_split_the_validation_best_is_kept():
    program, recorder, history = await fit(0.0)
    assert instructions(program) == "Lucky guess please."
    assert recorder.of("final_selection") == []
    assert history.params["selection_samples"] == 0


async def test_the_selection_split_keeps_the_candidate_that_holds_up_on_new_rows():
    program, recorder, history = await fit(0.3)
    assert history.params["selection_samples"] == 3
    assert history.params["validation_samples"] == 2
    assert instructions(program) == "Answer exactly, please."
    [final] = recorder.of("final_selection")
    lucky = [
        e for e in recorder.of("candidate") if e["value"]["instructions"] == "Lucky guess please."
    ]
    assert final["validation_best_id"] == lucky[0]["candidate_id"]
    assert final["chosen_id"] != final["validation_best_id"]
    assert final["top_k"] == final_selection.TOP_K
    assert final["selection_samples"] == 3
    scored = {
        e["candidate_id"]: e["selection_reward"]
        for e in recorder.of("candidate")
        if "selection_reward" in e
    }
    assert scored[final["validation_best_id"]] == 0.0
    assert scored[final["chosen_id"]] == 1.0
    assert set(scored) == set(final["contenders"])


async def test_scored_candidates_carry_per_example_rewards_and_costs():
    program, recorder, _ = await fit(0.0)
    scored = [e for e in recorder.of("candidate") if e["status"] == "scored"]
    assert scored
    for event in scored:
        assert len(event["example_rewards"]) == 2  # the two validation rows, in order
        assert sum(event["example_rewards"]) / 2 == pytest.approx(event["reward"])
        assert event["scoring_calls"] == 2
        assert event["prompt_tokens_per_call"] > 0
        assert event["latency_per_call"] is not None and event["latency_per_call"] >= 0
    longer = max(scored, key=lambda e: len(e["value"]["instructions"]))
    shorter = min(scored, key=lambda e: len(e["value"]["instructions"]))
    assert longer["prompt_tokens_per_call"] >= shorter["prompt_tokens_per_call"]
    lucky = next(e for e in scored if e["value"]["instructions"] == "Lucky guess please.")
    assert lucky["example_rewards"] == [1.0, 1.0]


def test_contenders_are_the_top_k_by_validation_and_the_seed():
    pool = [{"id": "c1", "operation": "seed", "reward": 0.1}] + [
        {"id": f"c{i}", "operation": "mutation", "reward": i / 10} for i in range(2, 10)
    ]
    ids = [c["id"] for c in final_selection.contenders(pool, top_k=3)]
    assert ids == ["c9", "c8", "c7", "c1"]
    for c, s in zip(pool, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.6, 0.5], strict=True):
        c["selection_reward"] = s
    contenders = final_selection.contenders(pool, top_k=3)
    # c8 gains 0.1 over the seed on selection: below a margin of 1/3, the seed stays
    assert final_selection.choose(contenders, 1 / 3)["id"] == "c1"
    assert final_selection.choose(contenders, 0.05)["id"] == "c8"
