"""Forms: build a program, import one, and launch a run.

Numbers are plain text fields on purpose: ``training.services.run_config`` is the single
validator and its messages (what is wrong, what is allowed) are attached to the fields.
"""

from __future__ import annotations

from django import forms
from django.conf import settings

from datasets.models import Dataset
from training.models import Program
from training.services import programs as program_services
from training.services.run_config import (
    METRICS,
    OMEGA_ALGORITHMS,
    OMEGA_DEFAULTS,
    OMEGA_SELECTIONS,
    OPTIMIZERS,
    RANDOM_FEW_SHOT_DEFAULTS,
    REWARDS,
    RunConfigError,
    validate_run_config,
)


def _number(initial, step="any", **attrs) -> forms.CharField:
    return forms.CharField(
        required=False,
        initial=initial,
        widget=forms.NumberInput(attrs={"step": step, **attrs}),
    )


class ProgramForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        help_text="Its input fields become the program's input, its target fields the output.",
    )
    module = forms.ChoiceField(choices=Program.MODULE_CHOICES, initial=Program.GENERATOR)
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}))
    model = forms.CharField(
        max_length=200,
        help_text="provider/name, e.g. local/smollm2 (offline), openai/gpt-4o-mini, ollama/llama3; fake/fewshot for a scripted test model.",
    )
    api_base = forms.CharField(max_length=300, required=False, label="API base (optional)")
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
        self.fields["model"].initial = settings.TRAINBOARD_LM
        self.engine_program = None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        dataset = data["dataset"]
        try:
            self.engine_program = program_services.build_engine_program(
                name=data["name"],
                description=data.get("description", ""),
                input_fields=dataset.input_schema_fields(),
                target_fields=dataset.target_schema_fields(),
                module=data["module"],
                instructions=data.get("instructions", ""),
                model=data["model"],
                temperature=data["temperature"],
                api_base=data.get("api_base", ""),
                max_tokens=data.get("max_tokens"),
            )
        except program_services.ProgramError as exc:
            field = "model" if "model" in str(exc).lower() else None
            self.add_error(field, str(exc))
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


class RunForm(forms.Form):
    program = forms.ModelChoiceField(queryset=Program.objects.none())
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none())
    # Reward
    reward = forms.ChoiceField(choices=[(name, name) for name in REWARDS], initial="ExactMatch")
    reward_in_mask = forms.CharField(
        required=False,
        label="in_mask",
        help_text="Comma-separated output fields to compare (default: the dataset's target fields).",
    )
    reward_out_mask = forms.CharField(
        required=False, label="out_mask", help_text="Comma-separated output fields to leave out."
    )
    reward_embedding_model = forms.CharField(
        required=False, label="Embedding model (CosineSimilarity)"
    )
    reward_language_model = forms.CharField(required=False, label="Judge model (LMAsJudge)")
    reward_criteria = forms.CharField(
        required=False, label="Criteria (LMAsJudge)", initial="accuracy and completeness"
    )
    # Metrics
    metrics = forms.MultipleChoiceField(
        choices=[(name, name) for name in METRICS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    metrics_in_mask = forms.CharField(required=False, label="Metrics in_mask")
    # Optimizer
    optimizer = forms.ChoiceField(
        choices=[(name, name) for name in OPTIMIZERS], initial="RandomFewShot"
    )
    rfs_few_shot_learning = forms.BooleanField(required=False, label="few_shot_learning")
    rfs_nb_min_examples = _number(RANDOM_FEW_SHOT_DEFAULTS["nb_min_examples"], step=1, min=0)
    rfs_nb_max_examples = _number(RANDOM_FEW_SHOT_DEFAULTS["nb_max_examples"], step=1, min=0)
    rfs_nb_candidates = _number(RANDOM_FEW_SHOT_DEFAULTS["nb_candidates"], step=1, min=1)
    omega_language_model = forms.CharField(
        required=False, label="language_model (default: the program's)"
    )
    omega_embedding_model = forms.CharField(required=False, label="embedding_model")
    omega_k_nearest_fitter = _number(OMEGA_DEFAULTS["k_nearest_fitter"], step=1, min=1)
    omega_mutation_temperature = _number(OMEGA_DEFAULTS["mutation_temperature"])
    omega_crossover_temperature = _number(OMEGA_DEFAULTS["crossover_temperature"])
    omega_selection_temperature = _number(OMEGA_DEFAULTS["selection_temperature"])
    omega_sampling_temperature = _number(OMEGA_DEFAULTS["sampling_temperature"])
    omega_few_shot_learning = forms.BooleanField(required=False, label="few_shot_learning")
    omega_nb_min_examples = _number(OMEGA_DEFAULTS["nb_min_examples"], step=1, min=0)
    omega_nb_max_examples = _number(OMEGA_DEFAULTS["nb_max_examples"], step=1, min=0)
    omega_merging_rate = _number(OMEGA_DEFAULTS["merging_rate"])
    omega_population_size = _number(OMEGA_DEFAULTS["population_size"], step=1, min=2)
    omega_algorithm = forms.ChoiceField(
        choices=[(n, n) for n in OMEGA_ALGORITHMS], initial="dns", required=False
    )
    omega_selection = forms.ChoiceField(
        choices=[(n, n) for n in OMEGA_SELECTIONS], initial="softmax", required=False
    )
    omega_instructions = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), label="instructions"
    )
    # Training loop
    epochs = _number(3, step=1, min=1)
    batch_size = _number(8, step=1, min=1)
    validation_split = _number(0.2, step="0.05", min=0, max=0.95)
    shuffle = forms.BooleanField(required=False, initial=True)
    seed = _number("", step=1, min=0, placeholder="random")
    evaluations_before = _number(1, step=1, min=0, label="Evaluate N times before")
    evaluations_after = _number(1, step=1, min=0)

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["program"].queryset = Program.objects.filter(owner=user)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=user)
        self.fields["omega_embedding_model"].initial = settings.TRAINBOARD_EMBEDDING_MODEL
        self.fields["evaluations_before"].label = "Evaluate N times before training"
        self.fields["evaluations_after"].label = "Evaluate N times after training"
        # Optimizer parameters are labelled with the guide's argument names, which users
        # already know from code (``nb_min_examples``, not "Rfs nb min examples").
        for name, field in self.fields.items():
            for prefix in ("rfs_", "omega_"):
                if name.startswith(prefix) and field.label is None:
                    field.label = name.removeprefix(prefix)
        self.run_config = None

    def clean(self):
        data = super().clean()
        program, dataset = data.get("program"), data.get("dataset")
        if program is None or dataset is None:
            return data
        try:
            engine_program = program_services.program_from_json(program.engine_json)
        except program_services.ProgramError as exc:
            self.add_error("program", str(exc))
            return data
        problems = program_services.check_compatible(
            engine_program, dataset.input_names, dataset.target_names
        )
        if problems:
            self.add_error("dataset", "; ".join(problems))
            return data
        try:
            self.run_config = validate_run_config(
                data,
                program_services.output_field_names(engine_program),
                dataset.target_names,
                program_services.summarize(engine_program)["model"] or program.model,
            )
        except RunConfigError as exc:
            for field, message in exc.errors.items():
                self.add_error(field if field in self.fields else None, message)
        return data
