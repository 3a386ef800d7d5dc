"""How close the local model (``local/smollm2``) runs to llama.cpp's own limit on this machine.

    .venv/bin/python bench/local_throughput.py [--before REV --together] [--skip-fits]

1. The limit. One fresh llama.cpp instance with the provider's threads per instance: a
   ~480-token few-shot prompt evaluated in one batch, then 64 tokens decoded one at a time
   (``Llama.eval``, no sampling): llama.cpp's prompt-eval and generation tok/s. (Its own
   ``llama_perf_context`` counters are off in llama-cpp-python's contexts.)
2. Free text against constrained text, through the provider's decoder, prompt prefix already
   held: 64 tokens of free text, then an answer under a JSON-schema grammar of two bounded
   strings (the shape a prediction has). Printed for this tree's decoder and for
   llama-cpp-python's ``create_chat_completion`` with the same grammar (what revision 8ddcc4c
   ran), with each answer checked against the schema ("same answer": the same text; for the
   constrained answer this tree appends the grammar's forced text in the tokenizer's
   spelling where create_chat_completion samples it token by token, so the free text after
   it may differ, see ``decoding.py``); each repeated REPEATS times,
   alternating, and the median rate printed (tok/s of generation: for the decoder without the
   prompt's last tokens, for create_chat_completion including them).
3. Real fits, each in its own process with the models already loaded (as a preloading worker
   serves them): the dashboard's demo run (the builtin ``demo`` routing data, the demo
   program's instructions and 24-token answers, RandomFewShot at the dashboard's defaults:
   3 epochs, batch 8, validation split 0.2) and a 1-epoch OMEGA fit (few-shot learning on, the
   dashboard's default) on the same data; and the demo fit again with the demo program's output
   as ``bootstrap_demo`` builds it today, ``team`` a label set (the data's teams, an ``enum``
   in the schema; an older demo answered free text, as the first fit does;
   8ddcc4c's fit makes 57 calls on it where this tree's makes 86, so compare its lines per call).
   OMEGA's own LM (its mutations and crossovers) is the one the dashboard gives it: the program's model without the program's 24-token cap (the
   cap would cut every mutation's JSON short), so the local provider's default cap
   (:func:`optimizer_max_tokens`), passed explicitly to both trees. Printed: wall time, chat calls, prompt tokens sent
   and evaluated, generated tokens, test reward. With ``--before REV`` each fit also runs from
   that git revision (a temporary ``git worktree``); ``--together`` starts both at the same
   moment, so both see the same background load. Also printed, for this tree: where its time
   in llama.cpp went (prompt evaluation, generation), the generated tokens the grammar forced
   (appended without a sampling step) and the evaluations of generated tokens, the time its
   calls waited for core slots, the free cores its prompts borrowed (``decoding.py``), and for both trees the CPU seconds the fit's process used
   (the work, whatever the machine's load). Each child of this tree takes its core slots
   (``core_slots.py``) in a folder of its own: the revision takes none, and the slots other
   people's processes on a shared machine hold would otherwise be counted against this tree.

Prompt tokens evaluated: this tree counts them exactly (``smollm2.totals()``); for a revision
without that counter they are llama.cpp's evaluated tokens (``Llama.eval`` is wrapped in the
child) minus the generated tokens, marked with ``~``.

The last line sums it up:
``local: demo fit X s (was Y s), omega epoch A s (was B s), prompt tokens evaluated P % of sent,
constrained G tok/s vs free F tok/s, limit L tok/s, achieved M tok/s``: L is llama.cpp's
generation rate (1.), M the generation rate this tree's fits got (generated tokens per second
of generation, per instance: sampling, grammar and Python included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import revisions

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "datasets/builtin/demo/data.jsonl"
#: The demo program (training/management/commands/bootstrap_demo.py) and run defaults
#: (training/services/run_config.py TRAINING_DEFAULTS, DASHBOARD_OPTIMIZER_DEFAULTS).
DEMO_INSTRUCTIONS = (
    "Decide which team should handle the customer's message. Answer with the team's code name only."
)
DEMO_MAX_TOKENS = 24
DEMO_FIT = {"epochs": 3, "batch_size": 8, "validation_split": 0.2}
OMEGA_FIT = {"epochs": 1, "batch_size": 8, "validation_split": 0.2}
OMEGA_PARAMS = {"few_shot_learning": True}
TEST_ROWS = 12
GENERATED = 64
#: Each free/constrained measurement is repeated, alternating, and the median printed.
REPEATS = 3
#: The fits each tree runs (``run_fit``'s spec): the demo, the demo with its label set, OMEGA.
FITS = {
    "demo": {"optimizer": "rfs"},
    "labels": {"optimizer": "rfs", "labels": True},
    "omega": {"optimizer": "omega"},
}
#: Two bounded strings: the shape of a prediction with its reasoning.
SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 200},
        "answer": {"type": "string", "maxLength": 200},
    },
    "required": ["reasoning", "answer"],
}


def optimizer_max_tokens() -> int:
    """The ``max_tokens`` OMEGA's LM has in a dashboard run, for both trees' children.

    ``training/execution/run_config.build_optimizer`` makes OMEGA's LM with
    ``make_language_model(model)``, which sets no ``max_tokens``, so each call gets the local
    provider's default cap (``smollm2.DEFAULT_MAX_TOKENS``), read here from this tree: a
    revision whose default differs is still measured on the cap users get today.

    Returns:
        The cap in tokens (512 at the time of writing).
    """
    from trainboard_local import smollm2

    return smollm2.DEFAULT_MAX_TOKENS


def demo_rows() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


def few_shot_messages(question: str) -> list[dict]:
    """A ~480-token prompt: instructions and 20 demonstrations, then one question."""
    shots = "\n".join(
        f'Input: {{"message": {json.dumps(r["message"])}}}\nOutput: {{"team": "{r["team"]}"}}'
        for r in demo_rows()[:20]
    )
    return [
        {"role": "system", "content": f"{DEMO_INSTRUCTIONS}\nExamples:\n{shots}"},
        {"role": "user", "content": question},
    ]


# -- 1 and 2: the limit, free against constrained ----------------------------------------------
def measure_rates() -> dict:
    import jsonschema
    import llama_cpp

    from trainboard_local import smollm2
    from trainboard_local.decoding import Decoder

    _, threads, n_ctx = smollm2._settings()

    def fresh():
        return llama_cpp.Llama(
            model_path=str(smollm2.model_path()),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

    question = "Explain in detail how to reset a forgotten password, step by step."
    messages = few_shot_messages(question)
    # 1. llama.cpp's own rates: one prompt batch, then single-token decodes.
    llama = fresh()
    decoder = Decoder(llama)
    prompt = decoder.prompt_tokens(messages)
    started = time.perf_counter()
    llama.eval(prompt)
    prompt_seconds = time.perf_counter() - started
    tokens = llama.tokenize(b" and then" * 40, False, False)[:GENERATED]
    started = time.perf_counter()
    for token in tokens:
        llama.eval([token])
    decode_seconds = time.perf_counter() - started
    limit = {
        "prompt_tokens": len(prompt),
        "prompt_eval_tok_s": len(prompt) / prompt_seconds,
        "generation_tok_s": len(tokens) / decode_seconds,
        "threads": threads,
        "weights": smollm2.model_path().name,
    }
    # 2. This tree's decoder, prefix held (a first call evaluates it).
    decoder.held = []
    decoder.complete(messages, temperature=0.0, max_tokens=1)
    runs = {}
    budget = smollm2.token_budget(llama, messages, GENERATED)  # bounded as complete() does
    gbnf = smollm2.grammar_for(
        {"type": "json_schema", "json_schema": {"schema": SCHEMA}},
        budget,
        smollm2.TYPICAL_CHARS_PER_TOKEN,
    )
    for kind, grammar in (("free", None), ("constrained", gbnf)) * REPEATS:
        started = time.perf_counter()
        result = decoder.complete(messages, temperature=0.0, max_tokens=GENERATED, grammar=grammar)
        seconds = time.perf_counter() - started
        usage = result["usage"]
        valid = None
        if grammar is not None:
            jsonschema.validate(json.loads(result["choices"][0]["message"]["content"]), SCHEMA)
            valid = True
        runs[kind] = {
            "tokens": usage["completion_tokens"],
            "seconds": seconds,
            # generation only: the prompt's last tokens are evaluated again each call
            "rates": runs.get(kind, {}).get("rates", [])
            + [usage["completion_tokens"] / result["timings"]["generation_seconds"]],
            "evaluated": usage["prompt_tokens_evaluated"],
            "full_passes": usage["grammar_full_passes"],
            "valid": valid,
        }
    # The same two through llama-cpp-python's create_chat_completion (revision 8ddcc4c's path).
    old = fresh()
    old.create_chat_completion(messages=messages, temperature=0.0, max_tokens=1)
    for kind, grammar in (("free", None), ("constrained", gbnf)) * REPEATS:
        started = time.perf_counter()
        result = old.create_chat_completion(
            messages=messages,
            temperature=0.0,
            max_tokens=GENERATED,
            grammar=llama_cpp.LlamaGrammar.from_string(grammar, verbose=False) if grammar else None,
        )
        seconds = time.perf_counter() - started
        tokens = result["usage"]["completion_tokens"]
        # The answers compared on a whole-prompt evaluation: on a cached prompt
        # create_chat_completion evaluates the last prompt token alone, a one-token batch
        # whose rounding differs (decoding.py), so its answer depends on the cache.
        old.reset()
        reference = old.create_chat_completion(
            messages=messages,
            temperature=0.0,
            max_tokens=GENERATED,
            grammar=llama_cpp.LlamaGrammar.from_string(grammar, verbose=False) if grammar else None,
        )
        ours = decoder.complete(messages, temperature=0.0, max_tokens=GENERATED, grammar=grammar)
        same = (
            reference["choices"][0]["message"]["content"]
            == ours["choices"][0]["message"]["content"]
        )
        old.create_chat_completion(messages=messages, temperature=0.0, max_tokens=1)  # cached again
        runs[f"old_{kind}"] = {
            "tokens": tokens,
            "seconds": seconds,
            "rates": runs.get(f"old_{kind}", {}).get("rates", []) + [tokens / seconds],
            "same": same,
        }
    old.close()
    llama.close()
    for run in runs.values():  # the median of the repeats (a shared machine's load varies)
        run["tok_s"] = statistics.median(run["rates"])
    return {"limit": limit, "runs": runs}


# -- 3: real fits (children) -------------------------------------------------------------------
async def run_fit(spec: dict) -> dict:
    import llama_cpp
    import numpy as np

    import training.engine as synalinks
    from training.engine.optimizers import OMEGA, RandomFewShot

    evaluated = {"tokens": 0}
    original_eval = llama_cpp.Llama.eval

    def counting_eval(self, tokens):
        evaluated["tokens"] += len(tokens)
        return original_eval(self, tokens)

    llama_cpp.Llama.eval = counting_eval
    from trainboard_local import minilm, smollm2

    smollm2.complete([{"role": "user", "content": "hi"}], max_tokens=1)
    minilm.embed(["warm up"])
    trace: list[dict] = []  # every LM / embedding call of the fit (--trace)
    clock = {"start": time.perf_counter()}

    def traced(function, kind):
        def call(*args, **kwargs):
            began = time.perf_counter()
            result = function(*args, **kwargs)
            record = {"kind": kind, "start": began - clock["start"]}
            record["end"] = time.perf_counter() - clock["start"]
            if kind == "chat":
                usage = result.get("usage") or {}
                record["constrained"] = bool(kwargs.get("response_format"))
                record["max_tokens"] = kwargs.get("max_tokens")
                record.update({k: v for k, v in usage.items() if isinstance(v, int)})
                record.update(result.get("timings") or {})
            trace.append(record)
            return result

        return call

    smollm2.complete = traced(smollm2.complete, "chat")
    minilm.embed = traced(minilm.embed, "embed")

    class Message(synalinks.DataModel):
        message: str

    rows = demo_rows()
    if spec.get("labels"):  # the demo program as bootstrap_demo builds it today
        from training.engine.data_model import create_data_model

        labels = sorted({r["team"] for r in rows})  # datasets.labels: the values, sorted
        Team = create_data_model("Team", [{"name": "team", "type": "str", "choices": labels}])
    else:

        class Team(synalinks.DataModel):
            team: str

    x = np.array([Message(message=r["message"]) for r in rows], dtype="object")
    y = np.array([Team(team=r["team"]) for r in rows], dtype="object")
    x_train, y_train, x_test, y_test = (
        x[:-TEST_ROWS],
        y[:-TEST_ROWS],
        x[-TEST_ROWS:],
        y[-TEST_ROWS:],
    )
    lm = synalinks.LanguageModel(model="local/smollm2", max_tokens=DEMO_MAX_TOKENS)
    if spec["optimizer"] == "omega":
        em = synalinks.EmbeddingModel(model="local/minilm")
        mutator = synalinks.LanguageModel(
            model="local/smollm2", max_tokens=spec["optimizer_max_tokens"]
        )
        optimizer = OMEGA(language_model=mutator, embedding_model=em, seed=0, **OMEGA_PARAMS)
        fit = OMEGA_FIT
    else:
        optimizer = RandomFewShot(seed=0)
        fit = DEMO_FIT
    inputs = synalinks.Input(data_model=Message)
    outputs = await synalinks.Generator(
        data_model=Team, language_model=lm, instructions=DEMO_INSTRUCTIONS
    )(inputs)
    program = synalinks.Program(inputs=inputs, outputs=outputs, name="demo_router")
    program.compile(reward=synalinks.rewards.ExactMatch(in_mask=["team"]), optimizer=optimizer)
    counted = getattr(smollm2, "totals", None)
    if counted:
        counted(reset=True)
    evaluated["tokens"] = 0
    trace.clear()
    with synalinks.usage.track() as usage:
        started, cpu = time.perf_counter(), time.process_time()
        clock["start"] = started
        await program.fit(x_train, y_train, seed=0, **fit)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    eval_tokens = evaluated["tokens"]
    fit_calls = len(trace)  # the test evaluation's calls are not the fit's
    totals = counted() if counted else {}
    after = (await program.evaluate(x_test, y_test, batch_size=8))["reward"]
    exact = "prompt_tokens_evaluated" in totals
    return {
        **spec,
        "fit_seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "forced_tokens": totals.get("forced_tokens"),
        "generation_evals": totals.get("generation_evals"),
        "core_wait_seconds": round(totals.get("core_wait_ms", 0) / 1000, 1),
        "borrowed_cores": totals.get("borrowed_cores", 0),
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "prompt_evaluated": totals["prompt_tokens_evaluated"]
        if exact
        else max(0, eval_tokens - usage.completion_tokens),
        "evaluated_exact": exact,
        "completion_tokens": usage.completion_tokens,
        "prompt_seconds": round(totals.get("prompt_ms", 0) / 1000, 1),
        "generation_seconds": round(totals.get("generation_ms", 0) / 1000, 1),
        "decode_seconds": round(
            (totals.get("prompt_ms", 0) + totals.get("generation_ms", 0)) / 1000, 1
        ),
        "test_reward": after,
        # the file the tree's pool loaded (a tree before weights.py loads the shipped Q4_1)
        "weights": getattr(smollm2, "model_path", smollm2.gguf_path)().name,
        "trace": trace[:fit_calls],
    }


def start(spec: dict, code_root: Path):
    """Start one configuration in a fresh process with ``code_root`` as the engine's source
    (and core slots of its own, see the module docstring)."""
    os.environ["TRAINBOARD_LOCAL_LM_SLOTS_DIR"] = tempfile.mkdtemp(prefix="local-bench-cores-")
    return revisions.start(__file__, spec, code_root, "LOCAL_BENCH_CODE_ROOT")


def line(result: dict, label: str) -> str:
    share = result["prompt_evaluated"] / max(1, result["prompt_tokens"])
    mark = "" if result["evaluated_exact"] else "~"
    inside = (
        f" | in llama.cpp: prompt {result['prompt_seconds']} s, generation "
        f"{result['generation_seconds']} s (instance-seconds)"
        if result["evaluated_exact"]
        else ""
    )
    if result.get("forced_tokens") is not None:
        inside += (
            f", {result['forced_tokens']} tokens forced, {result['generation_evals']} "
            f"generation evals, core-slot wait {result['core_wait_seconds']} s, "
            f"{result.get('borrowed_cores', 0)} cores borrowed for prompts"
        )
    if result.get("cpu_seconds") is not None:
        inside += f" | CPU {result['cpu_seconds']} s"
    return (
        f"{label:<30} fit {result['fit_seconds']:>6.1f} s | {result['calls']:>4} calls | "
        f"prompt {result['prompt_tokens']:>7} sent, {mark}{result['prompt_evaluated']:>7} "
        f"evaluated ({mark}{100 * share:.0f} %) | {result['completion_tokens']:>5} generated | "
        f"test reward {result['test_reward']:.3f}{inside}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", default=None, help="git revision of the baseline")
    parser.add_argument(
        "--together", action="store_true", help="start the baseline and this tree together"
    )
    parser.add_argument("--skip-fits", action="store_true")
    parser.add_argument(
        "--trace", help="write every fit's calls (start, end, tokens, timings) to this JSON file"
    )
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        sys.path.insert(0, os.environ.get("LOCAL_BENCH_CODE_ROOT", str(ROOT)))
        print(json.dumps(asyncio.run(run_fit(json.loads(args.run)))))
        return
    sys.path.insert(0, str(ROOT))

    rates = measure_rates()
    limit, runs = rates["limit"], rates["runs"]
    print(
        f"== llama.cpp's own rates, {limit['threads']} thread(s): prompt eval "
        f"{limit['prompt_eval_tok_s']:.0f} tok/s ({limit['prompt_tokens']} tokens in one batch), "
        f"generation {limit['generation_tok_s']:.1f} tok/s, weights {limit['weights']} =="
    )
    for kind in ("free", "constrained"):
        new, old = runs[kind], runs[f"old_{kind}"]
        extra = (
            f", {new['full_passes']} full-vocabulary grammar passes, valid against the schema"
            if kind == "constrained"
            else ""
        )
        print(
            f"{kind:<12} decoder {new['tokens']:>3} tokens {new['tok_s']:>6.1f} tok/s "
            f"(prompt evaluated {new['evaluated']}){extra} | create_chat_completion "
            f"{old['tok_s']:>6.1f} tok/s, same answer: {old['same']}"
        )

    results: dict[str, dict] = {}
    if not args.skip_fits:
        baseline = revisions.worktree(args.before, "local-before-") if args.before else None
        try:
            for name, spec in FITS.items():
                if name == "omega":
                    spec = {**spec, "optimizer_max_tokens": optimizer_max_tokens()}
                before = start({**spec, "tree": "before"}, baseline) if baseline else None
                if before is not None and not args.together:
                    results[f"{name}_before"] = revisions.finish(before)
                    before = None
                results[name] = revisions.finish(start({**spec, "tree": "this"}, ROOT))
                if before is not None:
                    results[f"{name}_before"] = revisions.finish(before)
        finally:
            if baseline is not None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)],
                    capture_output=True,
                )
        print(
            f"== fits on the demo data (models loaded; OMEGA's LM max_tokens "
            f"{optimizer_max_tokens()}) =="
        )
        for key, label in (
            ("demo_before", f"demo fit @ {args.before}"),
            ("demo", "demo fit (this tree)"),
            ("labels_before", f"demo fit, label set @ {args.before}"),
            ("labels", "demo fit, label set (this tree)"),
            ("omega_before", f"OMEGA 1 epoch @ {args.before}"),
            ("omega", "OMEGA 1 epoch (this tree)"),
        ):
            if key in results:
                print(line(results[key], label) + f" | weights {results[key]['weights']}")
        if args.trace:
            Path(args.trace).write_text(
                json.dumps({key: result["trace"] for key, result in results.items()}, indent=1)
            )

    def seconds(key: str) -> str:
        return f"{results[key]['fit_seconds']:.1f}" if key in results else "nan"

    sent = sum(results[k]["prompt_tokens"] for k in ("demo", "omega") if k in results)
    evaluated = sum(results[k]["prompt_evaluated"] for k in ("demo", "omega") if k in results)
    generated = sum(results[k]["completion_tokens"] for k in ("demo", "omega") if k in results)
    generating = sum(
        results[k].get("generation_seconds", 0) for k in ("demo", "omega") if k in results
    )
    share = 100 * evaluated / sent if sent else float("nan")
    achieved = generated / generating if generating else float("nan")
    print(
        f"local: demo fit {seconds('demo')} s (was {seconds('demo_before')} s), omega epoch "
        f"{seconds('omega')} s (was {seconds('omega_before')} s), prompt tokens evaluated "
        f"{share:.0f} % of sent, constrained {runs['constrained']['tok_s']:.1f} tok/s vs free "
        f"{runs['free']['tok_s']:.1f} tok/s, limit {limit['generation_tok_s']:.1f} tok/s, "
        f"achieved {achieved:.1f} tok/s"
    )


if __name__ == "__main__":
    main()
