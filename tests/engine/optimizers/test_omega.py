"""OMEGA end to end with scripted fakes: mutations that help raise the reward, crossover
schedule, variable selection, events, failures that never kill fit, DNS embedding cost,
construction-time pitfalls and saving."""

from collections import Counter

import pytest

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, Answer, Query, build_program, dataset
from tests.engine.helpers_events import CANDIDATE_EVENT_KEYS, EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

PHRASE = "Answer with the exact canonical fact"


def phrase_learner():
    """The task LM: right only when its instructions contain PHRASE."""

    def respond(request):
        if PHRASE.lower() in request.instructions.lower():
            return {"answer": TRUTH[request.inputs["query"]]}
        return {"answer": "unknown"}

    return FakeLanguageModel(responder=respond)


def mutation_lm(script=None, record=True):
    """The optimizer LM: mutations cycle through ``script`` (instruction texts)."""
    script = script or ["Be brief.", f"Be brief. {PHRASE}."]
    counter = Counter()

    def respond(request):
        kind = "crossover" if request.module.startswith("omega_crossover") else "mutation"
        counter[kind] += 1
        if kind == "crossover":
            a = request.inputs["candidate_a"]["instructions"]
            b = request.inputs["candidate_b"]["instructions"]
            return {"thinking": "merge both", "instructions": f"{a} {b}".strip()}
        text = script[(counter[kind] - 1) % len(script)]
        return {"thinking": "the answers are 'unknown': be more precise", "instructions": text}

    lm = FakeLanguageModel(responder=respond)
    lm.record_requests = record
    lm.counter = counter
    return lm


def make_omega(lm=None, em=None, **kwargs):
    kwargs.setdefault("seed", 0)
    return OMEGA(
        language_model=lm or mutation_lm(), embedding_model=em or FakeEmbeddingModel(), **kwargs
    )


async def compiled(optimizer, task_lm=None):
    program = await build_program(task_lm or phrase_learner())
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    return program


async def test_mutations_that_find_the_phrase_raise_the_reward():
    lm = mutation_lm()
    optimizer = make_omega(lm, instructions="Look for missing precision")
    program = await compiled(optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    with synalinks.usage.track() as usage:
        history = await program.fit(
            x, y, validation_split=0.3, epochs=3, batch_size=4, seed=0, callbacks=[recorder]
        )
    assert history.history["reward"][0] == 0.0  # epoch 0 ran with the empty instructions
    assert history.history["val_reward"][-1] == 1.0
    assert history.history["reward"][-1] == 1.0
    assert PHRASE in program.trainable_variables[0].value["instructions"]
    # the mutation program saw the batch, the variable's description and the guidance
    request = lm.requests[0]
    assert request.temperature == pytest.approx(0.3)
    batch = request.inputs["batch"]
    assert {"inputs", "prediction", "ground_truth", "reward"} <= set(batch[0])
    assert batch[0]["prediction"] == {"answer": "unknown"}
    assert "instructions" in request.inputs["variable_description"]
    assert "Look for missing precision" in request.messages[0]["content"]
    # the LM writes only what it may edit: the instructions (and its reasoning)
    assert set(request.schema["properties"]) == {"thinking", "instructions"}
    # the optimizer's LM calls were counted by the usage tracker
    assert usage.by_model["fake/scripted"]["calls"] >= lm.calls > 0
    # every candidate was reported: seed and mutations, scored, kept/dropped, best at the end
    candidates = recorder.of("candidate")
    assert {e["operation"] for e in candidates} >= {"seed", "mutation"}
    assert {e["status"] for e in candidates} >= {"scored", "kept", "best"}
    for event in candidates:
        assert set(event) >= {"epoch", *CANDIDATE_EVENT_KEYS}
        if event["operation"] == "mutation":
            assert len(event["parent_ids"]) == 1
    best = [e for e in candidates if e["status"] == "best"]
    assert len(best) == 1 and best[0]["reward"] == 1.0
    # The first competition had three candidates, so DNS measured each one's novelty; later
    # ones only the best ("Be brief." again is much shorter than it: refused, never scored).
    kept = [e for e in candidates if e["status"] == "kept" and e["competition_epoch"] == 0]
    assert kept and all(isinstance(e["novelty"], float) for e in kept)
    refused = recorder.of("candidate_refused")
    assert {e["rule"] for e in refused} == {"shorter", "unchanged"}
    assert optimizer.refusals == {"shorter": 2, "unchanged": 2}


async def test_no_crossover_at_epoch_zero_then_merging_rate_times_epoch():
    lm = mutation_lm(script=[f"v{i}" for i in range(100)])
    optimizer = make_omega(lm, merging_rate=0.5, population_size=50)
    program = await compiled(optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    await program.fit(x, y, epochs=3, batch_size=1, seed=3, callbacks=[recorder])
    scored = [
        e for e in recorder.of("candidate") if e["status"] == "scored" and e["operation"] != "seed"
    ]
    by_epoch = {
        epoch: Counter(e["operation"] for e in scored if e["epoch"] == epoch) for epoch in range(3)
    }
    assert by_epoch[0]["crossover"] == 0 and by_epoch[0]["mutation"] == 10
    assert 0 < by_epoch[1]["crossover"] < 10  # p = 0.5
    assert by_epoch[2]["crossover"] == 10  # p = min(1, 0.5 * 2)
    for event in scored:
        if event["operation"] == "crossover":
            assert len(set(event["parent_ids"])) == 2
    crossover_requests = [r for r in lm.requests if r.module.startswith("omega_crossover")]
    assert crossover_requests and all(
        r.temperature == pytest.approx(0.3) for r in crossover_requests
    )


async def test_crossover_falls_back_to_mutation_with_one_candidate():
    lm = mutation_lm(script=["same"])  # every mutation is the same: population stays tiny
    optimizer = make_omega(lm, merging_rate=1.0)
    program = await compiled(optimizer)
    x, y = dataset(4)
    recorder = EventRecorder()
    await program.fit(x, y, epochs=2, batch_size=2, seed=0, callbacks=[recorder], initial_epoch=1)
    # epoch 1, rate 1.0: first batch has only the seed → mutation; then crossovers
    scored = [
        e for e in recorder.of("candidate") if e["status"] == "scored" and e["operation"] != "seed"
    ]
    assert scored[0]["operation"] == "mutation"


async def test_variable_selection_favours_the_worst_variable():
    optimizer = make_omega()
    good = synalinks.Variable({"instructions": "good"}, name="good")
    bad = synalinks.Variable({"instructions": "bad"}, name="bad")
    optimizer.trainable_variables = [good, bad]
    optimizer.add_candidate(good, good.value, "seed", candidate_id="c0", reward=1.0)["status"] = (
        "scored"
    )
    optimizer.add_candidate(bad, bad.value, "seed", candidate_id="c0", reward=0.0)["status"] = (
        "scored"
    )
    picks = Counter()
    for _ in range(5000):
        averages = [optimizer.average_reward(v) for v in optimizer.trainable_variables]
        picks[synalinks.optimizers.selection.select_variable(averages, optimizer.rng)] += 1
    expected_bad = 1 / (1 + 2.718281828**-1)
    assert abs(picks[1] / 5000 - expected_bad) < 0.02


async def test_dns_embeds_each_candidate_once_in_one_request():
    em = FakeEmbeddingModel()
    optimizer = make_omega(em=em, k_nearest_fitter=2, population_size=4)
    variable = synalinks.Variable({"instructions": ""}, name="v")
    optimizer.trainable_variables = [variable]
    texts = ["alpha beta", "alpha beta gamma", "delta", "epsilon zeta", "alpha", "beta gamma"]
    for i, text in enumerate(texts):
        candidate = optimizer.add_candidate(
            variable, {"instructions": text}, "mutation", reward=i / 10
        )
        candidate["status"] = "scored"
    with synalinks.usage.track() as usage:
        kept = await optimizer.compete(variable)
        assert (
            usage.embedding_calls == 1 and em.texts_embedded == 6 and optimizer.texts_embedded == 6
        )
        assert len(kept) <= 4 and max(c["reward"] for c in kept) == 0.5
        new = optimizer.add_candidate(
            variable, {"instructions": "eta theta"}, "mutation", reward=0.9
        )
        new["status"] = "scored"
        await optimizer.compete(variable)
        assert em.texts_embedded == 7  # only the new candidate was embedded
    dropped = [c for c in variable.candidates if c["status"] == "dropped"]
    assert dropped and all(c["novelty"] is not None for c in dropped)


async def test_ga_skips_the_competition():
    optimizer = make_omega(algorithm="ga", population_size=2, em=FakeEmbeddingModel())
    variable = synalinks.Variable({"instructions": ""}, name="v")
    optimizer.trainable_variables = [variable]
    for i in range(4):
        optimizer.add_candidate(variable, {"instructions": f"t{i}"}, "mutation", reward=i / 4)[
            "status"
        ] = "scored"
    kept = await optimizer.compete(variable)
    assert [c["value"]["instructions"] for c in kept] == ["t2", "t3"]
    assert optimizer.embedding_model.texts_embedded == 0
    assert all(c["novelty"] is None for c in variable.candidates)


async def test_custom_async_distance_function_is_used():
    calls = []

    async def distance(c1, c2, embedding_model=None, **kwargs):
        calls.append((c1["instructions"], c2["instructions"]))
        return abs(len(c1["instructions"]) - len(c2["instructions"])) / 10

    optimizer = OMEGA(
        language_model=mutation_lm(),
        distance_function=distance,
        k_nearest_fitter=1,
        population_size=10,
    )
    variable = synalinks.Variable({"instructions": ""}, name="v")
    optimizer.trainable_variables = [variable]
    for i, text in enumerate(["aaaaa", "aaaa", "a", "aaaaaaaaa"]):
        optimizer.add_candidate(variable, {"instructions": text}, "mutation", reward=(4 - i) / 4)[
            "status"
        ] = "scored"
    kept = await optimizer.compete(variable)
    # scores: 1.0, 0.1, 0.3 (nearest fitter 'aaaa'), 0.4 → median 0.35 → keep 0 and 3
    assert [c["value"]["instructions"] for c in kept] == ["aaaaa", "aaaaaaaaa"]
    assert len(calls) == 6


async def test_failed_mutation_calls_are_logged_and_skipped(caplog):
    broken = FakeLanguageModel(failure_rate=1.0, failure="fatal")
    optimizer = make_omega(broken)
    program = await compiled(optimizer)
    x, y = dataset(6)
    recorder = EventRecorder()
    history = await program.fit(x, y, epochs=2, batch_size=3, seed=0, callbacks=[recorder])
    assert history.history["reward"] == [0.0, 0.0]
    errors = recorder.of("optimizer_error")
    assert len(errors) == 4 and optimizer.failed_operations == 4
    assert errors[0]["operation"] == "mutation" and "non-retryable" in errors[0]["error"]
    assert "mutation of variable" in caplog.text
    assert program.trainable_variables[0].value["instructions"] == ""


async def test_output_outside_the_schema_is_skipped():
    lm = FakeLanguageModel(responder=lambda r: {"thinking": "x", "instructions": 42})
    optimizer = make_omega(lm)
    program = await compiled(optimizer)
    x, y = dataset(4)
    await program.fit(x, y, epochs=1, batch_size=2, seed=0)
    assert optimizer.failed_operations == 2
    assert [c["operation"] for c in program.trainable_variables[0].candidates] == ["seed"]


async def test_few_shot_learning_samples_correct_examples():
    def respond(request):  # task LM: right when it has examples
        return {"answer": TRUTH[request.inputs["query"]] if request.examples else "unknown"}

    optimizer = make_omega(
        mutation_lm(script=["Be brief."]),
        few_shot_learning=True,
        nb_min_examples=1,
        nb_max_examples=2,
    )
    program = await compiled(optimizer, FakeLanguageModel(responder=respond))
    x, y = dataset()
    history = await program.fit(x, y, validation_split=0.3, epochs=2, batch_size=4, seed=0)
    assert history.history["val_reward"][-1] == 1.0
    variable = program.trainable_variables[0]
    for candidate in variable.candidates:
        examples = candidate["value"]["examples"]
        if candidate["operation"] != "seed":
            assert 1 <= len(examples) <= 2
        for example in examples:
            assert example["outputs"]["answer"] == TRUTH[example["inputs"]["query"]]
    weights = optimizer.example_weights[variable.name]
    assert weights and set(weights.values()) <= {0.0, 1.0}


async def test_examples_only_variable_evolves_by_few_shot():
    optimizer = make_omega(few_shot_learning=True)
    variable = synalinks.Variable(
        {"examples": []},
        name="m/state",
        schema={
            "type": "object",
            "properties": {"examples": {"type": "array"}},
            "required": ["examples"],
        },
    )
    optimizer.trainable_variables = [variable]
    optimizer.example_pool["m/state"] = [{"inputs": {"q": "a"}, "outputs": {"a": "b"}}]

    async def scorer(values):
        return float(len(values["m/state"]["examples"]))

    optimizer.attach(None, None, scorer)
    await optimizer.score_pending()
    optimizer.add_candidate(variable, variable.value, "seed", reward=0.0)["status"] = "scored"
    candidate = await optimizer.evolve(variable, [])
    assert candidate["operation"] == "few_shot" and candidate["reward"] == 1.0
    assert optimizer.language_model.calls == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"embedding_model": None}, ValueError, "embedding_model"),
        ({"mutation_temperature": 0.0}, ValueError, "mutation_temperature"),
        ({"crossover_temperature": -1}, ValueError, "crossover_temperature"),
        ({"selection_temperature": 0}, ValueError, "selection_temperature"),
        ({"sampling_temperature": 0.0}, ValueError, "sampling_temperature"),
        ({"distance_function": lambda a, b, embedding_model=None: 0.0}, TypeError, "async"),
        ({"algorithm": "nsga"}, ValueError, r"\['dns', 'ga'\]"),
        ({"selection": "tournament"}, ValueError, r"\['random', 'best', 'softmax'\]"),
        ({"language_model": None}, ValueError, "language_model"),
        ({"k_nearest_fitter": 0}, ValueError, "k_nearest_fitter"),
        ({"population_size": 0}, ValueError, "population_size"),
    ],
)
def test_pitfalls_fail_at_construction(kwargs, error, match):
    arguments = {"language_model": FakeLanguageModel(), "embedding_model": FakeEmbeddingModel()}
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        OMEGA(**arguments)


def test_ga_needs_no_embedding_model():
    assert OMEGA(language_model=FakeLanguageModel(), algorithm="ga").embedding_model is None


async def test_config_and_state_are_saved_with_the_program(tmp_path):
    optimizer = make_omega(
        population_size=7,
        k_nearest_fitter=3,
        mutation_temperature=0.5,
        selection="best",
        instructions="Focus on edge cases",
        few_shot_learning=True,
    )
    program = await compiled(optimizer)
    x, y = dataset(6)
    await program.fit(x, y, epochs=1, batch_size=3, seed=0)
    path = tmp_path / "program.json"
    program.save(str(path))
    loaded = synalinks.Program.load(str(path))
    restored = loaded.optimizer
    assert isinstance(restored, OMEGA)
    saved, original = restored.get_config(), optimizer.get_config()
    # the fake's responder is an unregistered test function: it cannot be saved, the rest can
    assert saved.pop("language_model")["class_name"] == original.pop("language_model")["class_name"]
    assert saved == original
    assert restored.example_weights == optimizer.example_weights
    assert restored.candidate_count == optimizer.candidate_count
    assert [c["id"] for c in loaded.trainable_variables[0].candidates] == [
        c["id"] for c in program.trainable_variables[0].candidates
    ]


def test_omega_is_exported():
    assert synalinks.optimizers.OMEGA is OMEGA
    assert Query and Answer
