"""OMEGA's step runs while fit predicts the next batch, and that changes nothing but the wall
time: the step's candidate is scored with its values for its own task only, the next step is
drawn from the population that includes it, and a seeded fit makes the same candidates as
when each step is awaited at once."""

import training.engine as synalinks
from tests.engine.helpers_engine import TRUTH, build_program, dataset
from tests.engine.helpers_events import EventRecorder
from training.engine.optimizers import OMEGA
from training.engine.testing import FakeEmbeddingModel, FakeLanguageModel

SEED_TEXT = "Start here."
PHRASE = "Answer exactly"


class AwaitedAtOnce(OMEGA):
    """The reference: each step finished before fit predicts the next batch."""

    async def on_batch_end(self, batch, x, y, y_pred, rewards):
        await super().on_batch_end(batch, x, y, y_pred, rewards)
        await self.finish_step()


def task_lm(log, latency=0.0):
    def respond(request):
        log.append(("task", request.inputs["query"], request.instructions))
        if PHRASE.lower() in request.instructions.lower():
            return {"answer": TRUTH[request.inputs["query"]]}
        return {"answer": "unknown"}

    return FakeLanguageModel(responder=respond, latency=latency)


def optimizer_lm(log, latency=0.0):
    count = {"n": 0}

    def respond(request):
        count["n"] += 1
        log.append(("operator", count["n"]))
        texts = ["Be brief.", f"{PHRASE}.", "Hm.", f"{PHRASE}, be brief."]
        return {"thinking": "t", "instructions": texts[(count["n"] - 1) % len(texts)]}

    return FakeLanguageModel(responder=respond, latency=latency)


async def fit(cls, log, task_latency=0.0, operator_latency=0.0, epochs=2):
    optimizer = cls(
        language_model=optimizer_lm(log, operator_latency),
        embedding_model=FakeEmbeddingModel(),
        merging_rate=0.5,
        few_shot_learning=True,
        seed=3,
    )
    program = await build_program(task_lm(log, task_latency))
    program.variables[0].assign({"instructions": SEED_TEXT, "examples": []})
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["answer"]), optimizer=optimizer)
    x, y = dataset()
    recorder = EventRecorder()
    history = await program.fit(
        x, y, validation_split=0.3, epochs=epochs, batch_size=2, seed=0, callbacks=[recorder]
    )
    return program, recorder, history


def train_queries():
    x, _ = dataset()
    return {item.query for item in x[:7]}


async def test_the_next_batch_is_predicted_while_the_step_waits_on_its_lm():
    log = []
    await fit(OMEGA, log, operator_latency=0.2, epochs=1)
    first_operator = log.index(("operator", 1))
    train = train_queries()
    before = [e for e in log[:first_operator] if e[0] == "task" and e[1] in train]
    # batch 0 (2 items) and batch 1 (2 more) were predicted before the first LM call returned
    assert len(before) >= 4


async def test_scoring_a_candidate_never_leaks_into_the_batch_predicted_meanwhile():
    log = []
    # the operator answers at once, the task model slowly: the candidate's scoring overlaps
    # the next batch's predictions
    program, recorder, _ = await fit(OMEGA, log, task_latency=0.02, epochs=1)
    train = train_queries()
    train_calls = [e for e in log if e[0] == "task" and e[1] in train]
    assert train_calls and all(e[2] == SEED_TEXT for e in train_calls)  # epoch 0: the seed's
    scoring = [e for e in log if e[0] == "task" and e[1] not in train and e[2] != SEED_TEXT]
    candidate_texts = {
        e["value"]["instructions"] for e in recorder.of("candidate") if e["operation"] != "seed"
    }
    assert scoring and {e[2] for e in scoring} <= candidate_texts


async def test_a_seeded_fit_makes_the_same_candidates_as_steps_awaited_at_once():
    runs = []
    for cls in (OMEGA, AwaitedAtOnce):
        program, recorder, history = await fit(cls, [], task_latency=0.01, epochs=3)
        scored = [
            (
                e["candidate_id"],
                e["operation"],
                tuple(e["parent_ids"]),
                e["reward"],
                str(e["value"]),
            )
            for e in recorder.of("candidate")
            if e["status"] == "scored"
        ]
        runs.append((scored, history.history, program.variables[0].value))
    assert runs[0] == runs[1]
    scored, history, value = runs[0]
    assert {op for _, op, _, _, _ in scored} >= {"seed", "mutation", "crossover"}
    assert PHRASE in value["instructions"] and history["val_reward"][-1] == 1.0
