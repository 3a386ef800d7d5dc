"""``program_summary``: the text table ``Program.summary()`` prints (Keras' ``model.summary``)."""

from __future__ import annotations

import re
from typing import Any

# The automatic name of an Input (``input_2``) means nothing to a reader; the row then shows
# the Input's data model instead (``TweetInput (Input)``). An explicit name is kept.
_AUTO_INPUT_NAME = re.compile(r"input_\d+")


def program_summary(program: Any, print_fn: Any = print) -> str:
    """A table of the program's inputs and modules, then its trainable variables.

    Args:
        program: a built :class:`~training.engine.program.Program`.
        print_fn: called with the text (``None``: only return it).

    Returns:
        The summary text.

    Example:

    ```python
    text = program_summary(program, print_fn=None)
    ```
    """
    lines = [
        f"Program: {program.name}" + (f" — {program.description}" if program.description else "")
    ]
    header = f"{'Module (type)':<36}{'Inputs':<28}{'Output':<24}{'Variables':>9}"
    lines += ["=" * len(header), header, "=" * len(header)]
    for symbol in program.inputs:
        name = symbol.name
        if _AUTO_INPUT_NAME.fullmatch(name or ""):
            name = symbol.data_model.__name__
        lines.append(f"{name + ' (Input)':<36}{'':<28}{symbol.data_model.__name__:<24}{0:>9}")
    for node in program.nodes:
        ins = ", ".join(s.data_model.__name__ for s in node.inputs)
        lines.append(
            f"{node.module.name + ' (' + type(node.module).__name__ + ')':<36}{ins:<28}"
            f"{node.output.data_model.__name__:<24}{len(node.module.variables):>9}"
        )
    lines.append("=" * len(header))
    trainable = program.trainable_variables
    lines.append(f"Total variables: {len(program.variables)} (trainable: {len(trainable)})")
    for variable in trainable:
        value = variable.value
        line = (
            f"  {variable.name}: {len(value.get('instructions', '') or '')} chars of instructions, "
            f"{len(value.get('examples', []))} example(s)"
        )
        retrieval = value.get("retrieval") or {}
        if retrieval.get("pool"):  # NearestFewShot's pool (modules/example_retrieval.py)
            line += (
                f", {retrieval.get('k')} nearest of {len(retrieval['pool'])} pooled example(s)"
                f" by {retrieval.get('embedding_model') or 'its embedding model'}"
                + (" (voting only)" if retrieval.get("in_prompt") is False else "")
            )
        decision = value.get("decision") or {}
        if decision:  # CalibratedLabels' decision (modules/label_decision.py)
            line += (
                f", label decided from scores (LM × {decision.get('lm_weight')}, vote × "
                f"{decision.get('vote_weight')}, a bias per label)"
            )
        lines.append(line)
    text = "\n".join(lines)
    if print_fn is not None:
        print_fn(text)
    return text
