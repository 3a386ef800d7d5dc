"""The local decoder (``trainboard_local/decoding.py``) on the real SmolLM2: sampling
every token, the same answers as llama-cpp-python's create_chat_completion at temperature 0;
appending the text the grammar forces, the same labels with fewer evaluations; either way the
same answer whatever the instance held before; the shared prompt prefix evaluated once;
constrained answers valid; a seedless sampled call fixed by its request."""

import ctypes
import json

import jsonschema
import pytest

from trainboard_local import smollm2
from trainboard_local.core_slots import CoreSlots
from trainboard_local.decoding import Decoder, batches, shared_prefix
from trainboard_local.instance_pool import InstancePool
from trainboard_local.prefix_store import PrefixStore
from trainboard_local.sampling import LLAMA_RANDOM_SEED, fixed_seed

pytestmark = pytest.mark.slow

SYSTEM = (
    "Decide which team should handle the customer's message. Answer with the team's code "
    "name only.\nExamples:\n"
    + "\n".join(
        f'Input: {{"message": "{m}"}}\nOutput: {{"team": "{t}"}}'
        for m, t in [
            ("I was charged twice for my subscription this month.", "money"),
            ("The app crashes every time I open settings.", "bug"),
            ("My package has not arrived after two weeks.", "box"),
            ("Refund my last order please.", "money"),
            ("The export button does nothing.", "bug"),
            ("The parcel came damaged.", "box"),
        ]
    )
)
QUESTIONS = [
    "Why did you bill me after I closed my account?",
    "Can you deliver on Saturday?",
    "I get a timeout when uploading a photo.",
]
SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "team": {"type": "string"}},
    "required": ["reasoning", "team"],
}
FORMAT = {"type": "json_schema", "json_schema": {"schema": SCHEMA}}


def _messages(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture(scope="module")
def instances():
    import llama_cpp

    def load():
        return llama_cpp.Llama(
            model_path=str(smollm2.model_path()),
            n_ctx=2048,
            n_threads=1,
            n_threads_batch=1,
            verbose=False,
        )

    made = [load(), load()]
    yield made
    for llama in made:
        llama.close()


def _grammar(llama) -> str:
    budget = smollm2.token_budget(llama, _messages(QUESTIONS[0]), 48)
    return smollm2.grammar_for(FORMAT, budget, smollm2.TYPICAL_CHARS_PER_TOKEN)


def test_same_answers_as_create_chat_completion_with_and_without_the_held_prefix(instances):
    import llama_cpp

    reference, decoding = instances
    decoder = Decoder(decoding, append_forced=False)  # every token sampled, as the reference
    grammar = _grammar(decoding)
    for constrained in (False, True):
        # two questions: the second's held call starts from the first's prompt (a shared
        # system message); a third would add no other case
        for question in QUESTIONS[:2]:
            messages = _messages(question)
            reference.reset()  # the reference evaluates every prompt whole
            expected = reference.create_chat_completion(
                messages=messages,
                temperature=0.0,
                max_tokens=48,
                grammar=llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
                if constrained
                else None,
            )["choices"][0]["message"]["content"]
            held = decoder.complete(
                messages, temperature=0.0, max_tokens=48, grammar=grammar if constrained else None
            )
            decoder.held = []  # the same call on an instance that holds nothing
            fresh = decoder.complete(
                messages, temperature=0.0, max_tokens=48, grammar=grammar if constrained else None
            )
            assert held["choices"][0]["message"]["content"] == expected
            assert fresh["choices"][0]["message"]["content"] == expected
            if constrained:
                jsonschema.validate(json.loads(expected), SCHEMA)


def test_the_shared_prefix_is_evaluated_once(instances):
    decoder = Decoder(instances[1])
    decoder.held = []
    first = decoder.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=4)["usage"]
    second = decoder.complete(_messages(QUESTIONS[1]), temperature=0.0, max_tokens=4)["usage"]
    assert first["prompt_tokens_evaluated"] == first["prompt_tokens"]
    question_tokens = len(instances[1].tokenize(QUESTIONS[1].encode(), False, False))
    # the system prompt is kept: only the question and its template markers are evaluated
    assert second["prompt_tokens_evaluated"] <= question_tokens + 8
    assert second["prompt_tokens"] > 4 * second["prompt_tokens_evaluated"]


def test_the_pool_hands_a_call_to_the_decoder_holding_its_prefix(instances):
    first, second = Decoder(instances[0]), Decoder(instances[1])
    first.held, second.held = [], []
    other = [{"role": "user", "content": "Say hello."}]
    second.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=2)
    first.complete(other, temperature=0.0, max_tokens=2)
    pool = InstancePool([first, second])
    chosen = pool.take(_messages(QUESTIONS[2]))
    assert chosen is second
    assert shared_prefix(second.held, second.prompt_tokens(_messages(QUESTIONS[2]))) > 0
    assert pool.take(other) is first  # the only one left
    pool.give_back(first)
    pool.give_back(second)


OTHER_SYSTEM = [{"role": "system", "content": "Translate to French."}]


def test_a_system_message_the_last_prompt_replaced_is_restored_with_the_same_answer(instances):
    """OMEGA's pattern: a mutation prompt, the new candidate's predictions (another prompt),
    then the next mutation with the same system message. Its system message comes back from
    the saved keys/values (only the user turn is evaluated), and the answer, free or
    constrained, is the one a decoder that never held anything gives."""
    decoder = Decoder(instances[1])
    grammar = _grammar(instances[1])
    for constrained in (False, True):
        messages = _messages(QUESTIONS[2])
        kwargs = {"temperature": 0.0, "max_tokens": 24, "grammar": grammar if constrained else None}
        decoder.held, decoder.saved = [], PrefixStore()
        expected = decoder.complete(messages, **kwargs)
        decoder.held, decoder.saved = [], PrefixStore()
        decoder.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=2)  # saves SYSTEM
        decoder.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
        assert shared_prefix(decoder.held, decoder.prompt_tokens(messages)) < 32  # replaced
        again = decoder.complete(messages, **kwargs)
        question_tokens = len(instances[1].tokenize(QUESTIONS[2].encode(), False, False))
        # the user turn and its template markers (~10 tokens), not the ~170 of SYSTEM
        assert again["usage"]["prompt_tokens_evaluated"] <= question_tokens + 12
        assert (
            again["choices"][0]["message"]["content"]
            == (expected["choices"][0]["message"]["content"])
        )


def test_a_saved_prefix_that_cannot_be_restored_is_dropped_and_the_call_answers_whole(
    instances,
):
    """A restore llama.cpp refuses forgets that saved prefix, and the call evaluates its
    whole prompt instead (never an answer without its prefix): it answers as a decoder that
    never held anything, and so does the next one."""
    decoder = Decoder(instances[1])
    messages = _messages(QUESTIONS[2])
    decoder.held, decoder.saved = [], PrefixStore()
    expected = decoder.complete(messages, temperature=0.0, max_tokens=12)
    decoder.held, decoder.saved = [], PrefixStore()
    decoder.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=2)  # saves SYSTEM
    decoder.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
    [key] = decoder.saved.keys()
    decoder.saved.put(key, (ctypes.c_uint8 * 8)())  # a state llama.cpp cannot read back
    answer = decoder.complete(messages, temperature=0.0, max_tokens=12)
    assert key not in decoder.saved.keys()
    assert answer["usage"]["prompt_tokens_evaluated"] == len(decoder.prompt_tokens(messages))
    assert (
        answer["choices"][0]["message"]["content"] == expected["choices"][0]["message"]["content"]
    )
    decoder.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
    again = decoder.complete(messages, temperature=0.0, max_tokens=12)
    assert again["choices"][0]["message"]["content"] == expected["choices"][0]["message"]["content"]


class _VanishingStore(PrefixStore):
    """A store whose longest saved prefix another decoder's save drops between ``nearest``
    and ``get`` (the race ``Decoder._evaluate_new`` meets on a busy pool)."""

    vanish: tuple | None = None

    def get(self, key):
        if key == self.vanish:
            self.drop(key)
            raise KeyError(key)
        return super().get(key)


def test_a_saved_prefix_dropped_before_its_restore_falls_back_to_the_next_nearest(instances):
    """The system message with its few-shot turns vanishes from the store just before its
    restore: the system message alone, still saved, is restored instead, and only what follows
    it is evaluated; the answer is a fresh decoder's."""
    decoder = Decoder(instances[1], prefixes=_VanishingStore())
    decoder.complete(_few_shot(QUESTIONS[0]), temperature=0.0, max_tokens=2)
    decoder.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
    prompt = decoder.prompt_tokens(_few_shot(QUESTIONS[1]))
    system_cut, examples_cut = decoder._cuts(prompt)
    assert {tuple(prompt[:system_cut]), tuple(prompt[:examples_cut])} <= set(decoder.saved.keys())
    decoder.saved.vanish = tuple(prompt[:examples_cut])
    answer = decoder.complete(_few_shot(QUESTIONS[1]), temperature=0.0, max_tokens=12)
    assert answer["usage"]["prompt_tokens_evaluated"] == len(prompt) - system_cut
    expected = _fresh_answer(instances[1], _few_shot(QUESTIONS[1]), temperature=0.0, max_tokens=12)
    assert answer["choices"][0]["message"]["content"] == expected


def test_the_pool_hands_a_call_to_the_decoder_that_saved_its_system_message(instances):
    first, second = Decoder(instances[0]), Decoder(instances[1])
    for decoder in (first, second):
        decoder.held, decoder.saved = [], PrefixStore()
    second.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=2)
    second.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
    first.complete([{"role": "user", "content": "Say hello."}], temperature=0.0, max_tokens=2)
    pool = InstancePool([first, second])
    assert pool.take(_messages(QUESTIONS[1])) is second  # neither holds SYSTEM; second saved it
    pool.give_back(second)


def test_a_seedless_sampled_call_is_fixed_by_its_request(instances):
    first, second = Decoder(instances[0]), Decoder(instances[1])
    messages = [{"role": "user", "content": "Invent a name for a cat."}]
    second.complete(_messages(QUESTIONS[1]), temperature=0.0, max_tokens=2)  # other history
    answers = {
        decoder.complete(messages, temperature=0.9, max_tokens=12)["choices"][0]["message"][
            "content"
        ]
        for decoder in (first, second, first)
    }
    assert len(answers) == 1
    hotter = first.complete(messages, temperature=1.5, max_tokens=12)
    other_seed = first.complete(messages, temperature=0.9, max_tokens=12, seed=7)
    assert {hotter["choices"][0]["message"]["content"]} | {
        other_seed["choices"][0]["message"]["content"]
    } != answers


def test_sampled_constrained_answers_fit_the_schema(instances):
    decoder = Decoder(instances[0])
    grammar = _grammar(instances[0])
    for seed in (1, 2, 3):
        result = decoder.complete(
            _messages(QUESTIONS[seed - 1]),
            temperature=1.0,
            max_tokens=48,
            seed=seed,
            grammar=grammar,
        )
        jsonschema.validate(json.loads(result["choices"][0]["message"]["content"]), SCHEMA)


LABEL_SCHEMA = {
    "type": "object",
    "properties": {"team": {"enum": ["money", "bug", "box"]}},
    "required": ["team"],
}


def test_forced_text_is_appended_in_the_tokenizers_spelling(instances):
    """The grammar's forced text (``{"reasoning": "``, ``", "team": "``, the closing) is
    appended in the tokenizer's spelling without a sampling step each, compared here with
    sampling every token. Sampling, the model may spell forced text in odd pieces (``{`` ``"``
    ``re`` ``as`` ``on`` ``ing``: the best token the grammar allows), which changes the free
    text it writes after, so answers differ: both are valid, the appended ones need fewer
    evaluations and do not depend on what the instance held before. (Whether they are as
    good is the test reward of bench/local_throughput.py's fits.)"""
    appending, stepping = Decoder(instances[0]), Decoder(instances[1], append_forced=False)
    for schema in (SCHEMA, LABEL_SCHEMA):
        form = {"type": "json_schema", "json_schema": {"schema": schema}}
        budget = smollm2.token_budget(instances[0], _messages(QUESTIONS[0]), 48)
        grammar = smollm2.grammar_for(form, budget, smollm2.TYPICAL_CHARS_PER_TOKEN)
        for question in QUESTIONS:
            fast, slow = (
                decoder.complete(
                    _messages(question), temperature=0.0, max_tokens=48, grammar=grammar
                )
                for decoder in (appending, stepping)
            )
            appending.held = []
            fresh = appending.complete(
                _messages(question), temperature=0.0, max_tokens=48, grammar=grammar
            )
            answer = fast["choices"][0]["message"]["content"]
            assert fresh["choices"][0]["message"]["content"] == answer
            jsonschema.validate(json.loads(answer), schema)
            jsonschema.validate(json.loads(slow["choices"][0]["message"]["content"]), schema)
            assert answer.startswith('{"') and answer.endswith('"}')  # json.dumps's layout
            assert fast["usage"]["forced_tokens"] >= 4  # the opening at least
            assert slow["usage"]["forced_tokens"] == 0
            assert fast["usage"]["generation_evals"] < slow["usage"]["generation_evals"]


def test_no_batch_of_one_token():
    assert batches(10, 12, 512) == [(10, 12)]
    assert batches(0, 513, 512) == [(0, 511), (511, 513)]
    assert batches(0, 1024, 512) == [(0, 512), (512, 1024)]


def test_a_seed_is_never_the_value_llama_cpp_reads_as_random():
    assert fixed_seed(-1) != LLAMA_RANDOM_SEED
    assert fixed_seed(LLAMA_RANDOM_SEED) != LLAMA_RANDOM_SEED
    assert fixed_seed(7) == 7 and fixed_seed(2**32 + 7) == 7


def _idle() -> int:
    """The kernel's count of other running threads, fixed at 0: whether the cores are idle
    depends on who else uses this shared machine (``test_local_core_slots.py`` tests it)."""
    return 0


def _free_slots(directory) -> list[int]:
    """The core slots nobody holds now (each taken and given back at once)."""
    probe = CoreSlots(2, directory)
    taken = list(iter(probe.try_take, None))
    probe.give_back_all(taken)
    return taken


def _recording_threads(monkeypatch, llama) -> list[tuple[int, int]]:
    """(tokens, batch threads) of every evaluation on ``llama`` from now on."""
    import llama_cpp

    seen: list[tuple[int, int]] = []
    original = llama.eval

    def evaluate(tokens):
        seen.append((len(tokens), llama_cpp.llama_n_threads_batch(llama._ctx.ctx)))
        return original(tokens)

    monkeypatch.setattr(llama, "eval", evaluate)
    return seen


def test_a_lone_calls_prompt_runs_on_the_free_core_with_the_same_logits_and_answer(
    instances, tmp_path, monkeypatch
):
    """Both cores free, the caller holding one: the prompt is evaluated with 2 batch threads,
    generation with the instance's own 1, and the answers (free and constrained) and the
    logits after the prompt are those of one thread; a short follow-up (the held prefix's
    user turn) borrows nothing; the core and the thread count come back."""
    import llama_cpp
    import numpy as np

    llama = instances[1]
    slots = CoreSlots(2, tmp_path, running=_idle)
    own = slots.try_take()
    borrowing, alone = Decoder(llama, slots=slots), Decoder(llama)
    grammar = _grammar(llama)
    messages = _messages(QUESTIONS[0])
    prompt = alone.prompt_tokens(messages)
    for constrained in (False, True):
        kwargs = {"temperature": 0.0, "max_tokens": 24, "grammar": grammar if constrained else None}
        alone.held, alone.saved = [], PrefixStore()
        expected = alone.complete(messages, **kwargs)
        borrowing.held, borrowing.saved = [], PrefixStore()
        seen = _recording_threads(monkeypatch, llama)
        result = borrowing.complete(messages, **kwargs)
        monkeypatch.undo()
        assert (
            result["choices"][0]["message"]["content"]
            == (expected["choices"][0]["message"]["content"])
        )
        assert result["usage"]["borrowed_cores"] == 1
        # the system message (saved on the way), then the rest, on 2 threads
        assert [threads for _, threads in seen[:2]] == [2, 2]
        assert all(threads == 1 for _, threads in seen[2:])  # generation: its own thread
        if not constrained:
            assert sum(tokens for tokens, _ in seen[:2]) == len(prompt)
        assert llama_cpp.llama_n_threads_batch(llama._ctx.ctx) == 1
        assert _free_slots(tmp_path) == [1]  # given back
    logits = {}
    for decoder in (alone, borrowing):
        decoder.held, decoder.saved = [], PrefixStore()
        decoder._evaluate_prompt(prompt, [])
        logits[decoder is borrowing] = decoder._logits()
    assert borrowing.last_borrowed == 1
    assert np.array_equal(logits[True], logits[False])  # bitwise
    follow_up = borrowing.complete(_messages(QUESTIONS[1]), temperature=0.0, max_tokens=2)
    assert follow_up["usage"]["prompt_tokens_evaluated"] < 64
    assert follow_up["usage"]["borrowed_cores"] == 0
    slots.give_back(own)


def test_a_core_another_process_holds_is_never_borrowed(instances, tmp_path, monkeypatch):
    import llama_cpp

    llama = instances[1]
    slots, other_process = CoreSlots(2, tmp_path, running=_idle), CoreSlots(2, tmp_path)
    own, theirs = slots.try_take(), other_process.try_take()
    decoder = Decoder(llama, slots=slots)
    decoder.held, decoder.saved = [], PrefixStore()
    seen = _recording_threads(monkeypatch, llama)
    result = decoder.complete(_messages(QUESTIONS[2]), temperature=0.0, max_tokens=8)
    assert result["usage"]["prompt_tokens_evaluated"] == result["usage"]["prompt_tokens"]
    assert result["usage"]["borrowed_cores"] == 0
    assert {threads for _, threads in seen} == {1}
    assert llama_cpp.llama_n_threads_batch(llama._ctx.ctx) == 1
    assert _free_slots(tmp_path) == []  # still theirs and ours
    other_process.give_back(theirs)
    slots.give_back(own)


def test_the_borrowed_core_comes_back_on_an_error_and_on_a_cancelled_call(
    instances, tmp_path, monkeypatch
):
    import threading

    import llama_cpp

    llama = instances[1]
    slots = CoreSlots(2, tmp_path, running=_idle)
    own = slots.try_take()
    decoder = Decoder(llama, slots=slots)
    decoder.held, decoder.saved = [], PrefixStore()
    original = llama.eval

    def failing(tokens):
        if llama_cpp.llama_n_threads_batch(llama._ctx.ctx) == 2:
            raise RuntimeError("llama_decode returned -3")
        return original(tokens)

    monkeypatch.setattr(llama, "eval", failing)
    with pytest.raises(RuntimeError, match="llama_decode"):
        decoder.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=4)
    monkeypatch.undo()
    assert llama_cpp.llama_n_threads_batch(llama._ctx.ctx) == 1
    assert _free_slots(tmp_path) == [1]  # given back despite the error
    cancelled = threading.Event()
    evaluate_new = decoder._evaluate_new

    def evaluate_then_cancel(*args):  # the caller goes away once the prompt is evaluated
        evaluated = evaluate_new(*args)
        cancelled.set()
        return evaluated

    monkeypatch.setattr(decoder, "_evaluate_new", evaluate_then_cancel)
    decoder.held, decoder.saved = [], PrefixStore()
    result = decoder.complete(
        _messages(QUESTIONS[1]), temperature=0.0, max_tokens=4, cancelled=cancelled
    )
    monkeypatch.undo()
    assert result["choices"][0]["finish_reason"] == "cancelled"
    assert result["usage"]["borrowed_cores"] == 1
    assert llama_cpp.llama_n_threads_batch(llama._ctx.ctx) == 1
    assert _free_slots(tmp_path) == [1]
    slots.give_back(own)


FEW_SHOT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Where is my parcel? It is a week late."},
    {"role": "assistant", "content": "box"},
    {"role": "user", "content": "I was billed twice this month."},
    {"role": "assistant", "content": "money"},
]


def _few_shot(question: str) -> list[dict]:
    return FEW_SHOT + [{"role": "user", "content": question}]


def _fresh_answer(llama, messages: list[dict], **kwargs) -> str:
    """What a decoder that never held or saved anything answers."""
    return Decoder(llama).complete(messages, **kwargs)["choices"][0]["message"]["content"]


def test_a_prefix_one_decoder_evaluated_is_restored_by_another_with_the_same_answer(instances):
    """A candidate's system message and few-shot examples, evaluated by one instance, are
    restored by the other from the pool's store: only the new user turn is evaluated there,
    and its answer, free or constrained, is the one a decoder that never held anything gives."""
    grammar = _grammar(instances[1])
    for constrained in (False, True):
        kwargs = {"temperature": 0.0, "max_tokens": 24, "grammar": grammar if constrained else None}
        store = PrefixStore()
        first, second = Decoder(instances[0], prefixes=store), Decoder(instances[1], prefixes=store)
        first.complete(_few_shot(QUESTIONS[0]), **kwargs)
        messages = _few_shot(QUESTIONS[1])
        prompt = second.prompt_tokens(messages)
        context = tuple(prompt[: second._cuts(prompt)[-1]])
        assert context in store and len(context) > len(second.prompt_tokens(FEW_SHOT[:1])[:-2])
        answer = second.complete(messages, **kwargs)
        question_tokens = len(instances[1].tokenize(QUESTIONS[1].encode(), False, False))
        assert answer["usage"]["prompt_tokens_evaluated"] <= question_tokens + 12
        expected = _fresh_answer(instances[1], messages, **kwargs)
        assert answer["choices"][0]["message"]["content"] == expected


def test_two_calls_reaching_a_new_prefix_at_once_evaluate_it_once(instances):
    """A new candidate's first two predictions start together, one on each instance: one
    evaluates the shared prefix, the other waits for it and restores it, and both answer as
    decoders that never held anything."""
    import threading

    store = PrefixStore()
    decoders = [Decoder(llama, prefixes=store) for llama in instances]
    messages = [_few_shot(QUESTIONS[0]), _few_shot(QUESTIONS[2])]
    start, results = threading.Barrier(2), [None, None]

    def call(i: int) -> None:
        start.wait()
        results[i] = decoders[i].complete(messages[i], temperature=0.0, max_tokens=12)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    prompts = [decoders[0].prompt_tokens(m) for m in messages]
    context = decoders[0]._cuts(prompts[0])[-1]
    assert prompts[0][:context] == prompts[1][:context]
    evaluated = sum(result["usage"]["prompt_tokens_evaluated"] for result in results)
    assert evaluated == context + sum(len(prompt) - context for prompt in prompts)
    for i in range(2):
        expected = _fresh_answer(instances[0], messages[i], temperature=0.0, max_tokens=12)
        assert results[i]["choices"][0]["message"]["content"] == expected


def test_a_long_last_turn_is_saved_and_a_prompt_sharing_its_start_restores_that_much(instances):
    """OMEGA's pattern: two mutation prompts whose long user turns start alike (the variable's
    description), a candidate's predictions in between. The second evaluates only what
    follows the part the two share, and answers as a decoder that never held anything."""
    decoder = Decoder(instances[1])
    common = "Describe what each team handles, then improve the instruction. " * 6
    first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": common + "A."}]
    second = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": common + "B?"}]
    decoder.complete(first, temperature=0.0, max_tokens=4)
    decoder.complete(OTHER_SYSTEM + [{"role": "user", "content": "Hi"}], max_tokens=2)
    prompts = [decoder.prompt_tokens(m) for m in (first, second)]
    shared = shared_prefix(*prompts)
    assert shared > decoder._cuts(prompts[1])[-1] + 64  # well past the system message
    answer = decoder.complete(second, temperature=0.0, max_tokens=24)
    assert answer["usage"]["prompt_tokens_evaluated"] == len(prompts[1]) - shared
    expected = _fresh_answer(instances[1], second, temperature=0.0, max_tokens=24)
    assert answer["choices"][0]["message"]["content"] == expected


def test_a_call_cancelled_before_its_prompt_evaluates_nothing(instances):
    """A call whose caller went away while it waited (for a prefix another instance was
    evaluating) evaluates nothing, and the instance still holds what it held."""
    import threading

    decoder = Decoder(instances[1])
    decoder.complete(_messages(QUESTIONS[0]), temperature=0.0, max_tokens=2)
    held = list(decoder.held)
    cancelled = threading.Event()
    cancelled.set()
    result = decoder.complete(
        _few_shot(QUESTIONS[1]), temperature=0.0, max_tokens=8, cancelled=cancelled
    )
    assert result["choices"][0]["finish_reason"] == "cancelled"
    assert result["usage"]["prompt_tokens_evaluated"] == 0
    assert decoder.held == held
