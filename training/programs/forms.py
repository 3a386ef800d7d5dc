"""Forms of programs: build a program, import one.

The launch form's numbers are typed, bounded fields built from the engine's own declarations
(``training.engine.bounds`` objects, read through ``training.execution.run_config``): their
``min_value``/``max_value`` become the HTML ``min``/``max`` the browser enforces and the
check the server runs, with the engine's wording, and their initial values are the engine's
signature defaults. ``run_config.validate_run_config`` then builds the engine objects, whose
constructors have the last word; what they refuse is put on the field it is about.
"""

from __future__ import annotations

from django import forms
from django.conf import settings

from core.ids import as_id
from datasets import labels as dataset_labels
from datasets.models import Dataset
from training.models import Program
from training.programs import programs as program_services
from training.programs import saved_endpoints


class ProgramForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        help_text="Its input fields become the program's input, its target fields the output.",
    )
    use_label_set = forms.BooleanField(
        required=False,
        initial=True,
        label="Answer only the dataset's labels",
        help_text=(
            "When a target field is a label set (declared, or proposed because it looks like "
            "a label; see the dataset's page), the output field takes exactly those values."
        ),
    )
    module = forms.ChoiceField(choices=Program.MODULE_CHOICES, initial=Program.GENERATOR)
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    model = forms.CharField(
        max_length=200,
        help_text=(
            "provider/name, e.g. local/smollm2 (offline), openai/gpt-4o-mini, or "
            "ollama/llama3 on a saved endpoint."
        ),
    )
    endpoint = forms.ModelChoiceField(
        queryset=saved_endpoints.Endpoint.objects.none(),
        required=False,
        label="Endpoint (optional)",
        help_text=(
            "A model server saved in Settings → Endpoints (self-hosted or OpenAI-compatible; "
            "use a prefix such as openai/ or hosted_vllm/). Empty: the provider's own endpoint."
        ),
    )
    api_base = forms.CharField(
        max_length=300,
        required=False,
        label="API base (optional)",
        help_text="A public URL, called with no key; a local or private server: save it as an endpoint.",
    )
    temperature = forms.FloatField(initial=0.0, min_value=0.0, max_value=2.0)
    max_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        help_text="Cap on each answer's length (keeps small local models from rambling).",
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=user)
        self.fields["endpoint"].queryset = saved_endpoints.visible_to(user)
        self.fields["endpoint"].label_from_instance = lambda endpoint: (
            f"{endpoint.name} (everyone's)" if endpoint.shared else endpoint.name
        )
        self.fields["model"].initial = settings.TRAINBOARD_LM
        self.engine_program = None
        self.label_sets = {}
        chosen = self.initial.get("dataset")
        chosen = as_id(chosen)
        dataset = self.fields["dataset"].queryset.filter(pk=chosen).first() if chosen else None
        if dataset is not None:  # "New program from this dataset": say which labels
            self.label_sets = dataset_labels.label_sets(dataset)
            if self.label_sets:
                self.fields["use_label_set"].help_text = "; ".join(
                    f"{name}: {', '.join(values)}" for name, values in self.label_sets.items()
                )

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        dataset = data["dataset"]
        endpoint = data.get("endpoint")
        if endpoint is not None:
            if (data.get("api_base") or "").strip():
                self.add_error("api_base", "pick an endpoint or type an API base, not both")
                return data
            data["api_base"] = endpoint.url
        try:
            self.engine_program = program_services.build_engine_program(
                name=data["name"],
                description=data.get("description", ""),
                input_fields=dataset.input_schema_fields(),
                target_fields=dataset_labels.program_target_fields(
                    dataset, bool(data.get("use_label_set"))
                ),
                module=data["module"],
                instructions=data.get("instructions", ""),
                model=data["model"],
                temperature=data["temperature"],
                api_base=data.get("api_base", ""),
                max_tokens=data.get("max_tokens"),
                endpoint=endpoint.name if endpoint is not None else "",
                structured_output=endpoint.structured_output if endpoint is not None else "auto",
            )
        except program_services.ProgramError as exc:
            message = str(exc)
            field = "model" if "model" in message.lower() else None
            if message.startswith("api_base") or "custom API base" in message:
                # the endpoint rules (training/programs/endpoints.py)
                field = "endpoint" if endpoint is not None else "api_base"
            self.add_error(field, message)
        return data


class ImportProgramForm(forms.Form):
    file = forms.FileField(help_text="A JSON file written by program.save() (or exported here).")
    name = forms.CharField(
        max_length=200, required=False, help_text="Defaults to the name in the file."
    )
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), required=False)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=user)
        self.document = None
        self.summary = None

    def clean(self):
        data = super().clean()
        upload = data.get("file")
        if upload is None:
            return data
        if upload.size > program_services.IMPORT_MAX_BYTES:
            self.add_error(
                "file",
                f"the file is larger than {program_services.IMPORT_MAX_BYTES // (1024 * 1024)} MB",
            )
            return data
        try:
            self.document, self.summary = program_services.parse_import(upload.read())
        except program_services.ProgramError as exc:
            self.add_error("file", str(exc))
        return data
