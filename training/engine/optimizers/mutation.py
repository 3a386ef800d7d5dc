"""OMEGA's genetic operators: LM programs that rewrite a trainable variable.

Mutation and crossover are each a ``ChainOfThought`` whose output DataModel is built from the
variable's own JSON schema (``data_model_from_schema``), so the LM reasons first and then can
only emit a value of that shape. They call the optimizer's ``LanguageModel`` like any module,
so their calls are counted by ``usage.track()``.

Few-shot ``examples`` are never written by the LM: a demonstration must be a correct output
(the ground truth or a full-reward prediction), and an LM inventing one cannot guarantee that.
So the ``examples`` field is held out of the LM's schema, and the new value keeps the parent's
examples (or freshly sampled ones, with ``few_shot_learning``). A variable with nothing else to
edit can only evolve through its examples.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import Field

from training.engine.data_model import DataModel, data_model_from_schema, extend_data_model
from training.engine.language_models.tracing import trace_context
from training.engine.modules.chain_of_thought import THINKING_DESCRIPTION, ChainOfThought

#: Fields the LM never writes (see the module docstring); ``retrieval`` is NearestFewShot's
#: pool of embedded training examples and ``decision`` CalibratedLabels' fitted weights, kept
#: as the parent had them.
FROZEN_FIELDS = ("examples", "retrieval", "decision")
#: The LM sees the worst few batch items (the mistakes teach the most), each field clipped:
#: a 135M local model has a 4096-token context and reads a short prompt far better.
MAX_BATCH_ITEMS = 4
MAX_FIELD_CHARS = 200
MAX_LIST_ITEMS = 8
#: Ground-truth values shorter than this, when a field takes few distinct ones that repeat in
#: the batch, are listed in ``expected_values`` (a label set the program must be told about is
#: the commonest fix). Values that never repeat are answers, not labels: listing them made the
#: LM copy answers into the instructions, which then made the task model ramble.
MAX_VALUE_CHARS = 40
MAX_DISTINCT_VALUES = 12
#: Bounds on what the LM writes (in the output schema, so grammar-constrained local models obey
#: them and always close the JSON): short reasoning, then a prompt-sized value. Generated tokens
#: are what a step costs: a local mutation call took ~2.5x a task call for ~190 tokens, ~half of
#: OMEGA's fit time (bench/omega_speed.py --profile); a small model follows a few short rules.
#: bench/omega_speed.py --profile then showed ~190 tokens per mutation call, mostly reasoning:
#: the reasoning is now one short sentence and the value at most MAX_TEXT_CHARS.
MAX_THINKING_CHARS = 120
MAX_TEXT_CHARS = 400

MUTATION_INSTRUCTIONS = (
    "You improve one variable of an AI program (see `variable_description`). "
    "`current_variable` is its value now; `batch` shows the program's worst recent results: "
    "the `inputs`, its `prediction` and the expected `ground_truth`; `expected_values` lists "
    "the exact values the outputs must take and `hint` a rule they suggest. In `thinking`, say "
    "in one short sentence what the wrong predictions get wrong. Then rewrite the variable so "
    "the program outputs the ground truth: state the exact output values and format expected, "
    "as a few short general rules (never a list of single answers)."
)

CROSSOVER_INSTRUCTIONS = (
    "You merge two versions of one variable of an AI program (see `variable_description`). "
    "`candidate_a` and `candidate_b` are two good versions with the reward each earned (0 to "
    "1); `batch` shows the program's worst recent results (`inputs`, `prediction`, expected "
    "`ground_truth`); `expected_values` lists the exact values the outputs must take. In "
    "`thinking`, say in one short sentence what each version gets right. Then write one "
    "version that keeps the strengths of both, as a few short general rules."
)


class MutationInputs(DataModel):
    """What the mutation program sees."""

    variable_description: str = Field(..., description="What the variable is for")
    current_variable: dict[str, Any] = Field(..., description="The variable's current value")
    reward: float = Field(..., description="Validation reward of the current value, 0 to 1")
    batch: list[dict[str, Any]] = Field(
        ..., description="Worst recent items: inputs, prediction, ground truth, reward"
    )
    expected_values: dict[str, list[Any]] = Field(
        default_factory=dict, description="Each output field's expected values in the batch"
    )
    hint: str = Field("", description="A rule the batch suggests (may be worth including)")


class CrossoverInputs(DataModel):
    """What the crossover program sees."""

    variable_description: str = Field(..., description="What the variable is for")
    candidate_a: dict[str, Any] = Field(..., description="First parent value")
    reward_a: float = Field(..., description="Validation reward of candidate_a, 0 to 1")
    candidate_b: dict[str, Any] = Field(..., description="Second parent value")
    reward_b: float = Field(..., description="Validation reward of candidate_b, 0 to 1")
    batch: list[dict[str, Any]] = Field(
        ..., description="Worst recent items: inputs, prediction, ground truth, reward"
    )
    expected_values: dict[str, list[Any]] = Field(
        default_factory=dict, description="Each output field's expected values in the batch"
    )
    hint: str = Field("", description="A rule the batch suggests (may be worth including)")


def editable_schema(
    schema: dict[str, Any] | None, frozen: tuple[str, ...] = FROZEN_FIELDS
) -> dict | None:
    """The variable's schema without the frozen fields; None when nothing is left to edit.

    Top-level strings without a ``maxLength`` get MAX_TEXT_CHARS: an unbounded string lets a
    small model ramble until ``max_tokens`` cuts its JSON off. (Only the LM's output is bounded;
    the variable's own schema is unchanged.)
    """
    if not schema or schema.get("type", "object") != "object":
        return None
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in frozen}
    if not properties:
        return None
    result = copy.deepcopy(schema)
    result["properties"] = copy.deepcopy(properties)
    for spec in result["properties"].values():
        if isinstance(spec, dict) and spec.get("type") == "string" and "maxLength" not in spec:
            if not any(key in spec for key in ("enum", "const", "pattern", "format")):
                spec["maxLength"] = max(MAX_TEXT_CHARS, int(spec.get("minLength", 0)))
    result["required"] = [name for name in schema.get("required", []) if name in properties]
    return result


def _clip(value: Any) -> Any:
    """Shorten long strings (recursively) so one huge field cannot fill the LM's context."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD_CHARS else value[:MAX_FIELD_CHARS] + "…"
    if isinstance(value, dict):
        return {k: _clip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v) for v in value[:MAX_LIST_ITEMS]]
    return value


def _json(item: Any) -> Any:
    if item is None:
        return None
    if hasattr(item, "get_json"):
        return item.get_json()
    if isinstance(item, list | tuple):
        merged: dict[str, Any] = {}
        for part in item:
            merged.update(_json(part) or {})
        return merged
    return item


def batch_report(
    x: Any, y: Any, y_pred: Any, rewards: list[float], limit: int | None = None
) -> list[dict]:
    """The batch as the operators see it: the worst-rewarded items first (at most ``limit``).

    The evolver shows the LM only the worst MAX_BATCH_ITEMS, but reads ``expected_values``
    from every row, so the report keeps them all by default.
    """
    rows = []
    for index, reward in enumerate(rewards):
        rows.append(
            {
                "inputs": _clip(_json(x[index])),
                "prediction": _clip(_json(y_pred[index]))
                if y_pred[index] is not None
                else "(failed)",
                "ground_truth": _clip(_json(y[index])) if y is not None else None,
                "reward": round(float(reward), 4),
            }
        )
    rows.sort(key=lambda row: row["reward"])  # stable: equal rewards keep the batch order
    return rows if limit is None else rows[:limit]


def value_hint(values: dict[str, list[Any]]) -> str:
    """One plain sentence naming the closed value sets: small models copy text far more
    reliably than they derive it from a JSON structure."""
    parts = [
        f"`{name}` must be exactly one of: " + ", ".join(json.dumps(v) for v in options)
        for name, options in values.items()
        if len(options) > 1
    ]
    return ("The output " + "; ".join(parts) + ".") if parts else ""


def expected_values(batch: list[dict]) -> dict[str, list[Any]]:
    """Per ground-truth field, its distinct short values in the batch — when they look like a
    closed set (few, short, and some value repeats): what the program's prompt most often
    fails to name. A field whose values are all different (a number, a name: an answer) is
    left out."""
    seen: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    skipped: set[str] = set()
    for row in batch:
        truth = row.get("ground_truth")
        if not isinstance(truth, dict):
            continue
        for name, value in truth.items():
            if name in skipped:
                continue
            if not isinstance(value, str | int | bool) or len(str(value)) > MAX_VALUE_CHARS:
                skipped.add(name)
                continue
            values = seen.setdefault(name, [])
            counts[name] = counts.get(name, 0) + 1
            if value not in values:
                values.append(value)
    return {
        name: sorted(values, key=str)
        for name, values in seen.items()
        if name not in skipped and len(values) <= MAX_DISTINCT_VALUES and len(values) < counts[name]
    }


class VariableEvolver:
    """The mutation and crossover programs of one variable (built lazily, reused all fit).

    Args:
        variable: The trainable ``Variable`` whose editable fields (its schema) are rewritten.
        language_model: The LM that writes mutations and crossovers.
        mutation_temperature: Sampling temperature of mutation calls.
        crossover_temperature: Sampling temperature of crossover calls.
        instructions: Task-specific guidance appended to both programs' instructions.
    """

    def __init__(
        self,
        variable: Any,
        language_model: Any,
        mutation_temperature: float,
        crossover_temperature: float,
        instructions: str | None = None,
    ):
        self.variable_name = variable.name
        self.description = variable.description or f"Trainable variable {variable.name!r}"
        self.schema = editable_schema(
            variable.schema if variable.schema else _schema_of(variable.value)
        )
        self.language_model = language_model
        self.mutation_temperature = mutation_temperature
        self.crossover_temperature = crossover_temperature
        self.instructions = instructions
        self._output_model: type[DataModel] | None = None
        self._mutation: ChainOfThought | None = None
        self._crossover: ChainOfThought | None = None

    @property
    def editable(self) -> bool:
        return self.schema is not None

    def editable_part(self, value: dict[str, Any]) -> dict[str, Any]:
        fields = (self.schema or {}).get("properties", {})
        return {k: v for k, v in value.items() if k in fields}

    def _guidance(self, base: str) -> str:
        if self.instructions:
            return f"{base}\n\nTask-specific guidance:\n{self.instructions}"
        return base

    def output_model(self) -> type[DataModel]:
        if self._output_model is None:
            model = data_model_from_schema(self.schema, name="ImprovedVariable")
            if "thinking" not in model.model_fields:  # ChainOfThought then keeps this one
                thinking = Field(
                    ..., description=THINKING_DESCRIPTION, max_length=MAX_THINKING_CHARS
                )
                model = extend_data_model("ImprovedVariable", model, {"thinking": (str, thinking)})
            self._output_model = model
        return self._output_model

    def _program(self, kind: str) -> ChainOfThought:
        slug = "".join(ch if ch.isalnum() else "_" for ch in self.variable_name)
        if kind == "mutation":
            if self._mutation is None:
                self._mutation = ChainOfThought(
                    data_model=self.output_model(),
                    language_model=self.language_model,
                    instructions=self._guidance(MUTATION_INSTRUCTIONS),
                    temperature=self.mutation_temperature,
                    name=f"omega_mutation_{slug}",
                    trainable=False,
                )
            return self._mutation
        if self._crossover is None:
            self._crossover = ChainOfThought(
                data_model=self.output_model(),
                language_model=self.language_model,
                instructions=self._guidance(CROSSOVER_INSTRUCTIONS),
                temperature=self.crossover_temperature,
                name=f"omega_crossover_{slug}",
                trainable=False,
            )
        return self._crossover

    async def _run(self, kind: str, inputs: DataModel) -> DataModel | None:
        """Call the ``kind`` program; its LM calls are traced with that role."""
        with trace_context(role=kind):
            return await self._program(kind)(inputs)

    def _fields(self, output: DataModel) -> dict[str, Any]:
        data = output.get_json()
        keep = set((self.schema or {}).get("properties", {}))
        return {k: v for k, v in data.items() if k in keep}

    async def mutate(
        self, parent: dict[str, Any], reward: float, batch: list[dict]
    ) -> dict[str, Any]:
        """New values of the editable fields (raises whatever the LM call raises)."""
        inputs = MutationInputs(
            variable_description=self.description,
            current_variable=self.editable_part(parent),
            reward=round(float(reward), 4),
            batch=batch[:MAX_BATCH_ITEMS],
            expected_values=(values := expected_values(batch)),
            hint=value_hint(values),
        )
        output = await self._run("mutation", inputs)
        if output is None:
            raise RuntimeError("mutation program returned nothing")
        return self._fields(output)

    async def crossover(
        self,
        parent_a: dict[str, Any],
        reward_a: float,
        parent_b: dict[str, Any],
        reward_b: float,
        batch: list[dict],
    ) -> dict[str, Any]:
        inputs = CrossoverInputs(
            variable_description=self.description,
            candidate_a=self.editable_part(parent_a),
            reward_a=round(float(reward_a), 4),
            candidate_b=self.editable_part(parent_b),
            reward_b=round(float(reward_b), 4),
            batch=batch[:MAX_BATCH_ITEMS],
            expected_values=(values := expected_values(batch)),
            hint=value_hint(values),
        )
        output = await self._run("crossover", inputs)
        if output is None:
            raise RuntimeError("crossover program returned nothing")
        return self._fields(output)


def _schema_of(value: dict[str, Any]) -> dict[str, Any]:
    """A minimal schema for a variable created without one (strings, numbers, booleans)."""
    kinds = {str: "string", bool: "boolean", int: "integer", float: "number"}
    properties = {}
    for key, item in value.items():
        kind = kinds.get(type(item))
        if kind is not None:
            properties[key] = {"type": kind}
        elif isinstance(item, list) and all(isinstance(v, str) for v in item):
            properties[key] = {"type": "array", "items": {"type": "string"}}
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def canonical(value: Any) -> str:
    """Canonical JSON text of a value (cache keys, duplicate checks, embedding input)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
