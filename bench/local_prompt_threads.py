"""A lone call's prompt on one core or on two: what borrowing the free core slot buys.

    .venv/bin/python bench/local_prompt_threads.py [--repeats N]

One llama.cpp instance with the provider's one thread. Measured, alternating, ``--repeats``
times each, and the medians printed with the 1-minute load before and after:

1. The ~480-token few-shot prompt of ``bench/local_throughput.py`` (its system message saved
   on the way, as in a fit) evaluated by the provider's decoder (``decoding.py``) alone
   (1 batch thread) and given the core slots, both idle, in a folder of its own (it borrows
   the second: 2 batch threads, whatever the kernel's count of running threads, which the
   decoder would otherwise heed); the logits after the prompt compared bitwise.
2. Generation (why a borrow ends with the prompt): 32 tokens decoded one at a time after
   that prompt with 1 and with 2 threads.

Last line: ``prompt threads: 1 thread P1 tok/s, borrowed 2 threads P2 tok/s (xR), same logits
yes|no; generation 1 thread G1 tok/s, 2 threads G2 tok/s, load L``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: Single-token decodes timed for the generation rate.
GENERATED = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import llama_cpp
    import numpy as np
    from local_throughput import few_shot_messages

    from trainboard_local import smollm2
    from trainboard_local.core_slots import CoreSlots
    from trainboard_local.decoding import Decoder
    from trainboard_local.prefix_store import PrefixStore

    load_before = os.getloadavg()[0]
    llama = llama_cpp.Llama(
        model_path=str(smollm2.model_path()),
        n_ctx=smollm2.DEFAULT_N_CTX,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )
    ctx = llama._ctx.ctx
    folder = tempfile.mkdtemp(prefix="trainboard-bench-slots-")
    # the kernel's count of running threads ignored: on a loaded machine the decoder would
    # borrow nothing, and this measures what a borrow does (the load is printed with it)
    slots = CoreSlots(2, Path(folder), running=lambda: 0)
    own = slots.try_take()  # what the provider holds for the call
    decoders = {1: Decoder(llama), 2: Decoder(llama, slots=slots)}
    prompt = decoders[1].prompt_tokens(few_shot_messages("Can you deliver on Saturday?"))
    prompt_seconds: dict[int, list[float]] = {1: [], 2: []}
    logits: dict[int, np.ndarray] = {}
    for _ in range(args.repeats):
        for threads, decoder in decoders.items():
            decoder.held, decoder.saved = [], PrefixStore()
            started = time.perf_counter()
            decoder._evaluate_prompt(prompt, [])
            prompt_seconds[threads].append(time.perf_counter() - started)
            assert decoder.last_borrowed == threads - 1, "the idle second slot was not borrowed"
            logits[threads] = decoder._logits()
    tokens = llama.tokenize(b" and then" * 20, False, False)[:GENERATED]
    generation_seconds: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for threads in (1, 2):
            llama_cpp.llama_set_n_threads(ctx, threads, threads)
            llama.n_tokens = len(prompt)
            started = time.perf_counter()
            for token in tokens:
                llama.eval([token])
            generation_seconds[threads].append(time.perf_counter() - started)
    llama_cpp.llama_set_n_threads(ctx, 1, 1)
    slots.give_back(own)
    load_after = os.getloadavg()[0]

    rate = {t: len(prompt) / statistics.median(s) for t, s in prompt_seconds.items()}
    gen = {t: GENERATED / statistics.median(s) for t, s in generation_seconds.items()}
    for threads in (1, 2):
        print(
            f"prompt {len(prompt)} tokens, {threads} batch thread(s): "
            + ", ".join(f"{s:.2f}" for s in prompt_seconds[threads])
            + f" s, median {rate[threads]:.0f} tok/s"
        )
        print(
            f"generation {GENERATED} tokens, {threads} thread(s): "
            + ", ".join(f"{s:.2f}" for s in generation_seconds[threads])
            + f" s, median {gen[threads]:.1f} tok/s"
        )
    same = "yes" if np.array_equal(logits[1], logits[2]) else "no"
    print(
        f"prompt threads: 1 thread {rate[1]:.0f} tok/s, borrowed 2 threads {rate[2]:.0f} tok/s "
        f"(x{rate[2] / rate[1]:.2f}), same logits {same}; generation 1 thread {gen[1]:.1f} "
        f"tok/s, 2 threads {gen[2]:.1f} tok/s, load {load_before:.1f}-{load_after:.1f}"
    )
    llama.close()


if __name__ == "__main__":
    main()
