"""Forecast of a run before launch: LM calls, tokens, cost and time for the whole run.

Calls come from the configuration and the data by the engine's counting rule
(``training.forecasting.forecast.count_calls``: what ``fit`` and the evaluations around it do per
optimizer). Tokens and time come from what recent finished runs of the model observed per
call (:mod:`training.execution.pace.measured`), never from a wait on a worker:

- **Sized calls** (:func:`call_sizes`): the program's own prompts for the training rows (its
  instructions, pinned examples, the output note) in tokens at the characters per token the
  model's runs' traces measured (before any run: :data:`DEFAULT_CHARS_PER_TOKEN`, said as an
  assumption); under a new candidate, plus the examples it samples (RandomFewShot,
  NearestFewShot, OMEGA with ``few_shot_learning``) and the instructions OMEGA rewrites;
  answers from the targets' JSON. An LM judge's calls and OMEGA's mutations: what recent
  runs' traces measured on that model; before that, the judge's own prompt, formatted, and
  a mutation's stated assumption.
- **Tokens and seconds**: each role's calls at what the model's recent runs observed per
  call, at the load measured now; a role no run observed at its sized tokens (and the
  seconds a token keeps a thread busy in the observed calls); no time at all while no run
  of the model was measured.
- **The queue now** (:func:`~training.execution.pace.machine.machine`): how long the run waits
  for a worker process behind the runs executing or queued.

Every figure says what it assumes (``assumptions``). At launch the forecast is stored in the
run (``Run.forecast``, :func:`at_launch`); the run page shows it against the actual, and the
worker's :func:`~training.execution.pace.learning.learn_from_run` keeps what the run observed.
How a forecast reads in words is :mod:`training.execution.forecast_text`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from datasets.services import get_split
from training import conf, optimizer_registry
from training.engine.language_models.output_format import output_note, with_output_note
from training.engine.masking import apply_mask
from training.engine.modules.chain_of_thought import ChainOfThought
from training.engine.optimizers.card import DRAWS, EDITABLE, EXAMPLES, INSTRUCTIONS, NEAREST
from training.engine.optimizers.mutation import MAX_BATCH_ITEMS, MAX_TEXT_CHARS
from training.engine.rewards.judging import to_json_text
from training.engine.trainers.data_adapter import scoring_positions
from training.engine.utils.paired_bootstrap import detectable_gain
from training.execution import budget, forecast_text, run_config
from training.execution.pace import machine
from training.execution.pace import measured as observed_calls
from training.execution.run_config import judge_model, optimizer_model
from training.forecasting import decided
from training.forecasting import forecast as call_forecast
from training.forecasting.measured import (
    ANSWER_CHARS_PER_TOKEN,
    DEFAULT_CHARS_PER_TOKEN,
    JUDGE_ANSWER_TOKENS,
    LONG_ANSWER_TOKENS,
    MESSAGE_TOKENS,
    CallSize,
)
from training.programs.lm import ModelStringError, make_embedding_model, make_language_model
from training.programs.programs import program_from_json

logger = logging.getLogger(__name__)

#: Training rows whose prompts are sized (their mean stands for all).
SIZED_ROWS = 24
#: Prompt characters of an LM judge's call (when its prompt cannot be formatted) and of an
#: OMEGA mutation before a run of the model has measured them (then
#: ``measured.learned_size``): the judge reads its instructions and the criteria, then the
#: reference and the prediction (an example's answer each); a mutation reads its
#: instructions and the variable, then the batch's report (each item's inputs, prediction
#: and ground truth: an example and a half; the worst ``mutation.MAX_BATCH_ITEMS`` of the
#: batch). Their answers: ``JUDGE_ANSWER_TOKENS`` and ``LONG_ANSWER_TOKENS``. The demo's
#: mutations measured 545 prompt tokens (≈ 2,000 characters with its four report items of
#: ≈ 110).
JUDGE_PROMPT_CHARS = 800
MUTATION_PROMPT_CHARS = 1550
REPORT_ITEM_SHARE = 1.5
#: Share of a mutation's answer that is the new instructions (the rest: its reasoning).
INSTRUCTION_SHARE = 0.5


#: Marks (in the learned sizes) an LM judge's tokens measured on this program's own data.
JUDGE_ON_THIS_DATA = "judge_on_this_data"


# -- counting ---------------------------------------------------------------------------------


def _engine_program(program_row: Any) -> Any:
    return program_from_json(program_row.engine_json)


def _inputs(engine: Any, rows: list[dict]) -> list[Any]:
    input_model = engine.inputs[0].data_model
    names = list(input_model.model_fields)
    return [input_model(**{name: row.get(name) for name in names}) for row in rows]


def shape_for(program_row: Any, dataset: Any, config: dict[str, Any]) -> call_forecast.RunShape:
    """The engine's :class:`RunShape` of a run configuration on a dataset."""
    engine = _engine_program(program_row)
    train_rows, _ = get_split(dataset, "train")
    test_rows, _ = get_split(dataset, "test")
    lm_modules = [m for m in engine.modules if getattr(m, "language_model", None) is not None]
    optimizer = config["optimizer"]["name"]
    params = config["optimizer"].get("params") or {}
    card = optimizer_registry.card(optimizer)
    variables = [v.value for v in engine.trainable_variables]
    if card.proposes_for == EDITABLE:  # an LM call per step when its LM may write a field
        proposes = any(set(value) - {"examples"} for value in variables)
    else:  # a value for each state with examples (and examples to draw, when it draws them)
        proposes = any("examples" in value for value in variables)
        if card.proposes == DRAWS:
            proposes = proposes and int(params.get("nb_max_examples", 3)) > 0
    pool = _pool_shape(params) if card.embeds_pool else {}
    return call_forecast.RunShape(
        train_inputs=_inputs(engine, train_rows),
        test_size=len(test_rows),
        epochs=int(config["epochs"]),
        batch_size=int(config["batch_size"]),
        validation_split=float(config["validation_split"]),
        selection_split=float(config.get("selection_split") or 0.0),
        optimizer=optimizer,
        nb_candidates=int(params.get("nb_candidates", 1)),
        nb_min_examples=int(params.get("nb_min_examples", 1)),
        nb_max_examples=int(params.get("nb_max_examples", 3)),
        proposes=proposes,
        # A ChainOfThought's examples come only from full-reward predictions.
        proposes_certain=not any(isinstance(m, ChainOfThought) for m in lm_modules),
        lm_modules=max(1, len(lm_modules)),
        deterministic=all(m.deterministic for m in lm_modules if hasattr(m, "deterministic")),
        evaluations_before=int(config["evaluations_before"]) if test_rows else 0,
        evaluations_after=int(config["evaluations_after"]) if test_rows else 0,
        samples=min(int(conf.get("TRAINBOARD_SAMPLE_PREDICTIONS")), len(test_rows)),
        judge_calls=run_config.judge_calls(config),
        **pool,
    )


def _pool_shape(params: dict[str, Any]) -> dict[str, int]:
    """The part of the shape of an optimizer that embeds a pool: its size and its embedding
    model's batch (texts a request), which the engine counts the embedding requests by."""
    shape = {"pool_size": int(params.get("pool_size") or call_forecast.RunShape.pool_size)}
    try:
        model = make_embedding_model(params.get("embedding_model") or "")
    except ModelStringError:
        return shape  # the engine's default batch
    batch = getattr(model, "batch_size", None)
    if isinstance(batch, int) and batch > 0:
        shape["embedding_batch_size"] = batch
    return shape


# -- tokens per call ---------------------------------------------------------------------------


def _generators(engine: Any) -> list[Any]:
    return [m for m in engine.modules if getattr(m, "language_model", None) is not None]


def _tokens(chars: float, messages: int, chars_per_token: float) -> float:
    return chars / max(chars_per_token, 0.5) + messages * MESSAGE_TOKENS


def _prompt_chars(generator: Any, input_json: dict[str, Any]) -> tuple[int, int, int]:
    """Characters and messages of the prompt ``generator`` sends for ``input_json``, and the
    characters of its last message (the input: what calls under one candidate do not share)."""
    messages = generator.format_messages(input_json)
    last = len(str(messages[-1].get("content") or ""))
    model = generator.output_data_model
    lm = generator.language_model
    try:
        with_schema = not lm.supports_response_schema()
    except Exception:
        with_schema = True
    messages = with_output_note(messages, output_note(model.get_schema(), with_schema, key=model))
    return sum(len(str(m.get("content") or "")) for m in messages), len(messages), last


def call_sizes(
    program_row: Any,
    dataset: Any,
    config: dict[str, Any],
    chars_per_token: float,
    learned: dict[str, Any],
    assumptions: list[str],
    made: frozenset[str] = frozenset({"judge", "mutation"}),
) -> tuple[dict[str, CallSize], dict[str, CallSize]]:
    """Tokens per call by role, and the program's by part (``seed``, ``candidates``), at
    ``chars_per_token``; what is assumed rather than measured about the roles the run makes
    calls of (``made``: ``judge``, ``mutation``) is appended to ``assumptions``."""
    cpt = chars_per_token
    said = {role: assumptions if role in made else [] for role in ("judge", "mutation")}
    engine = program_from_json(program_row.engine_json)
    generators = _generators(engine)
    train_rows, targets = get_split(dataset, "train")
    rows = train_rows[:SIZED_ROWS] or [{}]
    targets = targets[:SIZED_ROWS] or [{}]
    names = list(engine.inputs[0].data_model.model_fields)
    prompt = completion = fresh = 0.0
    example_chars = answer_chars = 0.0
    for generator in generators:
        chars = [_prompt_chars(generator, {n: row.get(n) for n in names}) for row in rows]
        prompt += sum(_tokens(c, m, cpt) for c, m, _ in chars) / len(chars)
        fresh += sum(_tokens(last, 1, cpt) for _, _, last in chars) / len(chars)
        answer = sum(len(json.dumps(t, ensure_ascii=False)) for t in targets) / len(targets)
        answer_chars += answer
        answer_tokens = answer / ANSWER_CHARS_PER_TOKEN
        if isinstance(generator, ChainOfThought):  # its reasoning comes first
            answer_tokens += 0.5 * (generator.language_model.max_tokens or 256)
        max_tokens = generator.language_model.max_tokens
        if max_tokens:
            answer_tokens = min(answer_tokens, float(max_tokens))
        completion += answer_tokens
        example_chars = sum(
            len(json.dumps({n: row.get(n) for n in names}, ensure_ascii=False))
            + len(json.dumps(t, ensure_ascii=False))
            for row, t in zip(rows, targets, strict=False)
        ) / len(rows)
    seed = CallSize(prompt, completion, fresh)
    lm_count = max(1, len(generators))
    example_tokens = _tokens(example_chars, 2, cpt) * lm_count
    params = config["optimizer"].get("params") or {}
    grows = optimizer_registry.card(config["optimizer"]["name"]).grows_prompt
    extra = 0.0
    # sampled examples: RandomFewShot's, and an instruction rewriter's with few_shot_learning
    # (into the variables that hold examples)
    samples = any("examples" in v.value for v in engine.trainable_variables)
    if grows == EXAMPLES or (grows == INSTRUCTIONS and params.get("few_shot_learning") and samples):
        low = int(params.get("nb_min_examples", 1))
        high = min(int(params.get("nb_max_examples", 3)), max(1, len(train_rows)))
        extra = example_tokens * (max(0, low) + max(0, high)) / 2
    elif grows == NEAREST:
        extra = example_tokens * int(params.get("k") or 3)
    batch = int(config["batch_size"])
    # the evolver shows its LM the worst MAX_BATCH_ITEMS of the batch
    shown = min(batch, MAX_BATCH_ITEMS)
    mutation_chars = MUTATION_PROMPT_CHARS + shown * REPORT_ITEM_SHARE * example_chars
    mutation = learned_or_assumed(
        learned, "mutation", mutation_chars, LONG_ANSWER_TOKENS, cpt, said["mutation"]
    )
    if grows == INSTRUCTIONS:  # its candidates carry rewritten instructions
        instructions = max(
            (len((v.value.get("instructions") or "")) for v in engine.trainable_variables),
            default=0,
        )
        written = min(INSTRUCTION_SHARE * mutation.completion, MAX_TEXT_CHARS / cpt)
        extra += max(0.0, written - instructions / cpt) * lm_count
    candidates = CallSize(prompt + extra, completion, fresh)
    judge = observed_calls.learned_size(learned, "judge")
    if judge is not None:
        whose = (
            "this program's runs on this data"
            if learned.get(JUDGE_ON_THIS_DATA)
            else ("recent runs of this model (none of this program on this data yet)")
        )
        said["judge"].append(
            f"judge answers of ~{judge.completion:.0f} tokens (prompts ~{judge.prompt:.0f}), "
            f"as {whose} measured"
        )
    else:
        judge_chars = _judge_prompt_chars(config, generators, targets)
        if judge_chars is None:
            judge_chars = JUDGE_PROMPT_CHARS + 2 * answer_chars
        judge = learned_or_assumed(
            learned, "judge", judge_chars, JUDGE_ANSWER_TOKENS, cpt, said["judge"]
        )
    sizes = {"prediction": seed, "judge": judge, "mutation": mutation}
    return sizes, {"seed": seed, "candidates": candidates}


def _judge_prompt_chars(config: dict[str, Any], generators: list, targets: list) -> float | None:
    """Characters of an LM judge's prompt, the mean over the sized rows, each judging its
    target against itself: the judge's own instructions, criteria and output note, as the
    run formats them. None: no LM judge, or one whose prompt cannot be formatted here."""
    if not run_config.judge_calls(config) or not generators:
        return None
    try:
        reward = run_config.build_reward(config, program_model=generators[0].language_model)
        reward = getattr(reward, "fallback", reward)  # people's marks first: the LM judge's
        judge = reward.judge
    except (ModelStringError, ValueError, AttributeError) as error:  # the assumed size then
        logger.warning("an LM judge's prompt was not sized: %s", error)
        return None
    sizes = []
    for target in targets:
        # the target's compared fields, as the judge sees them
        answer = to_json_text(apply_mask(target, reward.in_mask, reward.out_mask, strict=False))
        request = {"criteria": reward.criteria, "reference": answer, "prediction": answer}
        sizes.append(_prompt_chars(judge, request)[0])
    return sum(sizes) / len(sizes)


def learned_or_assumed(
    learned: dict[str, Any],
    role: str,
    prompt_chars: float,
    answer_tokens: float,
    chars_per_token: float,
    assumptions: list[str],
) -> CallSize:
    """A judge's or a mutation's tokens as recent runs of the model measured them; else a
    prompt of ``prompt_chars`` and an answer of ``answer_tokens``."""
    found = observed_calls.learned_size(learned, role)
    if found is not None:
        return found
    assumptions.append(
        f"each {role} call ~{prompt_chars:.0f} prompt characters and a "
        f"{answer_tokens:.0f}-token answer (no run of this model measured one yet)"
    )
    return CallSize(_tokens(prompt_chars, 2, chars_per_token), answer_tokens)


# -- the forecast -----------------------------------------------------------------------------


def forecast(program_row: Any, dataset: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The forecast of a configuration (JSON: stored in the run at launch, rendered by the
    forecast partials): calls, tokens and cost always; time (``seconds``, ``time_text``)
    once a run of the model has been measured, else None."""
    shape = shape_for(program_row, dataset, config)
    calls = call_forecast.count_calls(shape)
    model = config.get("model") or program_row.model
    local = str(model).startswith("local/")
    models = {"prediction": model}
    if shape.judge_calls:
        models["judge"] = judge_model(config) or model
    if calls.optimizer.high:
        models["mutation"] = optimizer_model(config) or model
    # a model on the program's saved endpoint is kept apart (measured.pace_key)
    keys = {name: observed_calls.pace_key(program_row, name) for name in set(models.values())}
    stored = {name: observed_calls.stored_sizes(keys[name]) for name in keys}
    learned: dict[str, Any] = {}
    data_key = observed_calls.judge_data_key(program_row.pk, getattr(dataset, "pk", None))
    for role, name in models.items():
        row = stored[name]
        if role in row:  # an LM judge's or a mutation's tokens, on the model that makes them
            learned[role] = row[role]
        if role == "judge" and data_key in row:  # this program's judge on this data
            learned["judge"] = row[data_key]
            learned[JUDGE_ON_THIS_DATA] = True
    assumptions: list[str] = []
    calls = _settled(calls, stored[model], program_row, config, assumptions)
    chars_per_token = stored[model].get(observed_calls.CHARS_KEY)
    if not chars_per_token:
        chars_per_token = DEFAULT_CHARS_PER_TOKEN
        assumptions.append(
            f"prompts at {DEFAULT_CHARS_PER_TOKEN:.0f} characters a token (no run of this "
            "model measured them yet)"
        )
    made = frozenset(role for role in ("judge", "mutation") if role in models)
    sizes, by_part = call_sizes(
        program_row, dataset, config, float(chars_per_token), learned, assumptions, made
    )
    now = machine.machine()
    result: dict[str, Any] = {
        "calls": calls.total.rounded(),
        "parts": calls.to_dict(),
        "model": model,
        "pace_key": keys[model],
        # what its calls were sized at (a later forecast scales this run's measured tokens)
        "chars_per_token": float(chars_per_token),
        # where each role's tokens per call are learned (an LM judge's on the judge's model)
        "pace_keys": {role: keys[name] for role, name in models.items()},
        "local": local,
        "batch_size": int(config["batch_size"]),
        "tells": split_tells(dataset, config),
        "wait": now["wait"],
        "machine": now,
        "sizes": {
            key: {
                "prompt": round(v.prompt, 1),
                "completion": round(v.completion, 1),
                "fresh": None if v.fresh is None else round(v.fresh, 1),
            }
            for key, v in {**sizes, **{f"prediction_{k}": v for k, v in by_part.items()}}.items()
        },
        "assumptions": assumptions,
    }
    observed_calls.apply(result, program_row, config, stored[model])
    result["cost"] = _cost(program_row, config, result["tokens"], local, result["assumptions"])
    result["assumptions"] += forecast_text.assumed(now)
    result["summary"] = forecast_text.summary(result)
    result["cap_warnings"] = budget.cap_warnings(config, result, shape)
    return result


def _settled(
    calls: call_forecast.CallForecast,
    sizes: dict[str, Any],
    program_row: Any,
    config: dict[str, Any],
    assumptions: list[str],
) -> call_forecast.CallForecast:
    """``calls`` expected where the model's answers took the last runs of this program with
    this optimizer, else this optimizer's runs of the same shape on the model's other
    programs (:mod:`training.forecasting.decided`), the range as counted."""
    if calls.total.high <= calls.total.low:
        return calls
    optimizer = (config.get("optimizer") or {}).get("name")
    value, runs = observed_calls.recent_share(sizes, getattr(program_row, "pk", None), optimizer)
    which = f"{runs} recent run(s) of this program with {optimizer}"
    if value is None:
        value, runs = observed_calls.optimizer_share(sizes, optimizer, config)
        which = f"{runs} recent run(s) of this model's other programs with {optimizer}"
    if value is None:
        return calls
    assumptions.append(
        f"calls the model's answers decide expected where {which} took them ({value:.0%} of "
        "the way from the fewest to the most)"
    )
    return decided.settled(calls, value)


def judged_rows(train_rows: int, config: dict[str, Any]) -> int:
    """How many rows a candidate is judged on, out of ``train_rows`` training rows: the
    validation split cut off what the selection split leaves, every one of those training
    rows without a validation split or for an optimizer whose card cross-fits them."""
    validation = float(config.get("validation_split") or 0.0)
    name = (config.get("optimizer") or {}).get("name")
    if optimizer_registry.offered(name) and optimizer_registry.card(name).cross_fits:
        validation = 0.0
    selection = float(config.get("selection_split") or 0.0)
    return len(scoring_positions(train_rows, validation, selection))


def split_tells(dataset: Any, config: dict[str, Any]) -> dict[str, Any]:
    """What the run's splits can tell (``detectable_gain``, the paired 95% interval): its test
    split a change of the program, the rows a candidate is judged on a candidate's gain over
    the program (what it needs to replace it): the validation split, or every training row
    for an optimizer whose card cross-fits them."""
    train, test = int(dataset.train_count), int(dataset.test_count)
    validation = judged_rows(train, config)
    return {
        "test_rows": test,
        "test": detectable_gain(test),
        "validation_rows": validation,
        "validation": detectable_gain(validation),
    }


def _cost(
    program_row: Any,
    config: dict[str, Any],
    tokens: dict[str, Any],
    local: bool,
    assumptions: list[str],
) -> dict[str, float] | None:
    """The run's cost at its tokens (a local model: nothing; a price unknown: None)."""
    if local:
        return {"low": 0.0, "expected": 0.0, "high": 0.0}
    try:
        lm = make_language_model(config.get("model") or program_row.model)
        bound = [lm.cost_bound(int(tokens[k])) for k in ("low", "expected", "high")]
    except (ModelStringError, ValueError):
        return None
    if None in bound:
        return None
    assumptions.append("cost at the dearer of the model's input and output prices")
    return dict(zip(("low", "expected", "high"), bound, strict=True))


def at_launch(program_row: Any, dataset: Any, config: dict[str, Any]) -> dict[str, Any] | None:
    """What a run stores at launch (the forecast, measured figures when stored). Never stops
    a launch (a forecast that cannot be made is None, logged)."""
    try:
        return forecast(program_row, dataset, config)
    except Exception:
        logger.exception("forecast at launch failed")
        return None
