"""Generator: one structured LM call, input JSON → output DataModel.

Its trainable variable ``state`` holds ``{"instructions": str, "examples": [{"inputs",
"outputs"}]}``. The prompt is: a system message (fixed preamble, the instructions), the few-shot
examples as user/assistant turns, then the input JSON. The LanguageModel appends the output
fields (names, types, descriptions) to the system message on every call, and sends the schema
as ``response_format`` or in the prompt (see LanguageModel and output_format.py).
"""

from __future__ import annotations

import json
from typing import Any

from training.engine.data_model import DataModel, data_model_from_schema
from training.engine.language_models.language_model import LanguageModel
from training.engine.modules.module import TRACE, Module, field_list
from training.engine.saving import deserialize, register_synalinks_serializable, serialize
from training.engine.trainers import output_bounds

PREAMBLE = (
    "You are given an input JSON object. Respond with the output JSON object that the task "
    "asks for."
)

STATE_DESCRIPTION = (
    "The prompt state of generator {name!r}: `instructions` tell the language model how to "
    "turn an input into the output ({output}); `examples` are few-shot demonstrations, each a "
    "correct `outputs` object for its `inputs` object."
)


def _plain(schema: dict) -> dict:
    """A schema usable inline (no $refs) or a generic object schema."""
    text = json.dumps(schema)
    return schema if "$ref" not in text and "$defs" not in text else {"type": "object"}


def _merge_inputs(inputs: Any) -> dict[str, Any] | None:
    if isinstance(inputs, list | tuple):
        merged: dict[str, Any] = {}
        for item in inputs:
            if item is None:
                return None
            merged.update(item.get_json())
        return merged
    if inputs is None:
        return None
    return inputs.get_json() if hasattr(inputs, "get_json") else dict(inputs)


@register_synalinks_serializable(package="synalinks")
class Generator(Module):
    """``await Generator(data_model=Answer, language_model=lm)(inputs)``."""

    def __init__(
        self,
        data_model: type[DataModel] | None = None,
        schema: dict | None = None,
        language_model: LanguageModel | None = None,
        instructions: str | None = None,
        examples: list | None = None,
        temperature: float | None = None,
        name: str | None = None,
        description: str | None = None,
        trainable: bool = True,
    ):
        super().__init__(name=name, description=description, trainable=trainable)
        if data_model is None:
            if schema is None:
                raise ValueError(
                    f"{type(self).__name__} {self.name!r} needs data_model=... or schema=..."
                )
            data_model = data_model_from_schema(schema)
        if not (isinstance(data_model, type) and issubclass(data_model, DataModel)):
            raise TypeError(
                f"{type(self).__name__} {self.name!r}: data_model must be a DataModel class"
            )
        if language_model is None:
            raise ValueError(f"{type(self).__name__} {self.name!r} needs language_model=...")
        self.data_model = data_model
        self.language_model = language_model
        self.temperature = temperature
        self.initial_instructions = instructions or ""
        self.initial_examples = [self._normalize_example(e) for e in (examples or [])]
        self.output_data_model = self.compute_output_data_model([])
        self._prefix_cache: tuple[str, list[dict]] | None = None
        self.state = None

    # -- structure -------------------------------------------------------------------------
    def compute_output_data_model(self, input_data_models: list) -> type[DataModel]:
        return self.data_model

    @staticmethod
    def _normalize_example(example: Any) -> dict[str, Any]:
        if isinstance(example, dict) and "inputs" in example and "outputs" in example:
            pair = (example["inputs"], example["outputs"])
        elif isinstance(example, list | tuple) and len(example) == 2:
            pair = example
        else:
            raise ValueError(
                f"example {example!r}: expected (inputs, outputs) or {{'inputs','outputs'}}"
            )
        return {"inputs": _merge_inputs(pair[0]), "outputs": _merge_inputs(pair[1])}

    def state_schema(self) -> dict[str, Any]:
        inputs_schema = {"type": "object"}
        if self.input_data_models and len(self.input_data_models) == 1:
            inputs_schema = _plain(self.input_data_models[0].get_schema())
        return {
            "type": "object",
            "properties": {
                "instructions": {"type": "string", "description": "Task instructions for the LM"},
                "examples": {
                    "type": "array",
                    "description": "Few-shot demonstrations (correct outputs only)",
                    "items": {
                        "type": "object",
                        "properties": {
                            "inputs": inputs_schema,
                            "outputs": _plain(self.output_data_model.get_schema()),
                        },
                        "required": ["inputs", "outputs"],
                    },
                },
            },
            "required": ["instructions", "examples"],
        }

    def build(self, input_data_models: list) -> None:
        super().build(input_data_models)
        self.state = self.add_variable(
            "state",
            {"instructions": self.initial_instructions, "examples": self.initial_examples},
            self.state_schema(),
            STATE_DESCRIPTION.format(
                name=self.name,
                output=f"{self.output_data_model.__name__}: {field_list(self.output_data_model)}",
            ),
        )

    # -- prompt ----------------------------------------------------------------------------
    def prompt_prefix(self) -> list[dict[str, str]]:
        """System message + example turns, rebuilt only when the state variable changes."""
        key = self.state.hash
        if self._prefix_cache is not None and self._prefix_cache[0] == key:
            return self._prefix_cache[1]
        value = self.state.value
        system = PREAMBLE
        if self.description:
            system += f"\n\nTask: {self.description}"
        if value.get("instructions"):
            system += f"\n\nInstructions:\n{value['instructions']}"
        messages = [{"role": "system", "content": system}]
        for example in value.get("examples", []):
            messages.append(
                {"role": "user", "content": json.dumps(example["inputs"], ensure_ascii=False)}
            )
            messages.append(
                {"role": "assistant", "content": json.dumps(example["outputs"], ensure_ascii=False)}
            )
        self._prefix_cache = (key, messages)
        return messages

    def format_messages(self, input_json: dict[str, Any]) -> list[dict[str, str]]:
        return [
            *self.prompt_prefix(),
            {"role": "user", "content": json.dumps(input_json, ensure_ascii=False)},
        ]

    # -- run -------------------------------------------------------------------------------
    async def call(self, inputs: Any, training: bool = False) -> DataModel | None:
        input_json = _merge_inputs(inputs)
        if input_json is None:
            return None
        if not self.built:
            items = inputs if isinstance(inputs, list | tuple) else [inputs]
            self._ensure_built([type(item) for item in items])
        messages = self.format_messages(input_json)
        output = await self.language_model(
            messages,
            # within fit, at most OUTPUT_LENGTH_FACTOR × the longest target (output_bounds.py)
            output_bounds.bounded(self, self.output_data_model),
            temperature=self.temperature,
            context={"module": self.name, "inputs": input_json, "state": self.state.value},
        )
        trace = TRACE.get()
        if trace is not None:
            trace.append({"module": self.name, "inputs": input_json, "outputs": output.get_json()})
        return output

    @property
    def deterministic(self) -> bool:
        temperature = (
            self.language_model.temperature if self.temperature is None else self.temperature
        )
        return temperature == 0.0

    # -- saving ----------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "data_model": self.data_model.get_schema(),
                "language_model": serialize(self.language_model),
                "instructions": self.initial_instructions,
                "examples": self.initial_examples,
                "temperature": self.temperature,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None) -> Generator:
        config = dict(config)
        schema = config.pop("data_model")
        language_model = deserialize(config.pop("language_model"), custom_objects)
        return cls(schema=schema, language_model=language_model, **config)
