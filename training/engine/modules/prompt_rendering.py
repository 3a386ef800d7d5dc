"""How a Generator's prompt is written: one rule, used by the Generator and by its export.

Why one place: the plain-prompt export (``saving/plain_prompts.py``) and its re-scorer
(``saving/plain_prompt_scoring.py``) must send exactly what the Generator sends, or a parity
check would measure the drift between two renderings instead of the prompts. So the Generator
builds its messages here, and so do they.

The prompt: a system message (the fixed preamble, the module's task, the instructions), the
few-shot examples as user/assistant turns (each side its JSON), then the retrieved examples
(given nearest first, shown nearest last, next to the input), then the input's JSON. A vote
hint, when there is one, ends the system message. The LanguageModel then appends the output
note (``language_models/output_format.py``) to the system message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

PREAMBLE = (
    "You are given an input JSON object. Respond with the output JSON object that the task "
    "asks for."
)


def as_json(value: Any) -> str:
    """A turn's content: the object's JSON as the model reads it (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def system_content(description: str, instructions: str) -> str:
    """The system message: the preamble, then the task and the instructions when given."""
    system = PREAMBLE
    if description:
        system += f"\n\nTask: {description}"
    if instructions:
        system += f"\n\nInstructions:\n{instructions}"
    return system


def example_turns(examples: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Each example as a user turn (its inputs) and an assistant turn (its outputs)."""
    turns: list[dict[str, str]] = []
    for example in examples:
        turns.append({"role": "user", "content": as_json(example["inputs"])})
        turns.append({"role": "assistant", "content": as_json(example["outputs"])})
    return turns


def prefix_messages(
    description: str, instructions: str, examples: Iterable[dict[str, Any]]
) -> list[dict[str, str]]:
    """What every call starts with: the system message and the few-shot turns."""
    return [
        {"role": "system", "content": system_content(description, instructions)},
        *example_turns(examples),
    ]


def filled_messages(
    prefix: Sequence[dict[str, str]],
    input_json: dict[str, Any],
    retrieved: Sequence[dict[str, Any]] | None = None,
    hint: str = "",
) -> list[dict[str, str]]:
    """The prompt for ``input_json``: the ``prefix``, the ``retrieved`` examples (nearest
    first; shown nearest last), then the input. ``hint`` ends the system message."""
    messages = list(prefix)
    if hint:
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{hint}"}
    messages.extend(example_turns(reversed(list(retrieved or []))))
    messages.append({"role": "user", "content": as_json(input_json)})
    return messages


__all__ = [
    "PREAMBLE",
    "as_json",
    "example_turns",
    "filled_messages",
    "prefix_messages",
    "system_content",
]
