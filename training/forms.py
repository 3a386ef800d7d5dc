"""Forms: build a program, import one, and launch a run.

The launch form's numbers are typed, bounded fields built from the engine's own declarations
(``training.engine.bounds`` objects, read through ``training.services.run_config``): their
``min_value``/``max_value`` become the HTML ``min``/``max`` the browser enforces and the
check the server runs, with the engine's wording, and their initial values are the engine's
signature defaults. ``run_config.validate_run_config`` then builds the engine objects, whose
constructors have the last word; what they refuse is put on the field it is about.
"""

from __future__ import annotations

from functools import cached_property

from django import forms
from django.conf import settings

from datasets import labels as dataset_labels
from datasets.models import Dataset
from training import selectors
from training.engine import bounds
from training.models import Program
from training.services import budget
from training.services import programs as program_services
from training.services.run_config import (
    FIELD_PREFIXES,
    METRICS,
    OPTIMIZERS,
    PRESETS,
    REWARDS,
    TRAINING,
    TRAINING_DEFAULTS,
    TRAINING_HELP,
    RunConfigError,
    optimizer_fixed,
    optimizer_help,
    optimizer_parameters,
    validate_run_config,
)


def bounded_field(bound, initial=None, **kwargs) -> forms.Field:
    """An optional typed field that enforces ``bound`` (an engine bound) and says it its way.

    ``IntRange``/``FloatRange`` give an Integer/FloatField whose min/max are the bound's (so
    the HTML ``min``/``max`` too; floats get ``step="any"``: the server does not round), and
    ``Choice`` a ChoiceField listing the initial value first. Empty means "the default".

    Args:
        bound: An ``IntRange``, ``FloatRange`` or ``Choice``.
        initial: The initial value (the engine's default).
        **kwargs: Passed to the field (label, help_text, widget).

    Returns:
        The form field.
    """
    kwargs.setdefault("help_text", bound.help)
    if isinstance(bound, bounds.Choice):
        values = sorted(bound.values, key=lambda value: value != initial)
        return forms.ChoiceField(
            choices=[(value, value) for value in values], initial=initial, required=False, **kwargs
        )
    rule = f"must be {bound.describe()}"
    messages = {
        "invalid": rule,
        "min_value": f"{rule}, got %(value)s",
        "max_value": f"{rule}, got %(value)s",
    }
    field_class = forms.IntegerField if isinstance(bound, bounds.IntRange) else forms.FloatField
    return field_class(
        required=False,
        initial=initial,
        min_value=bound.min,
        max_value=bound.max,
        error_messages=messages,
        **kwargs,
    )


def _optimizer_fields() -> dict[str, forms.Field]:
    """Every offered parameter of every optimizer, as ``rfs_nb_min_examples`` etc."""
    fields: dict[str, forms.Field] = {}
    for name, prefix in FIELD_PREFIXES.items():
        fixed = optimizer_fixed(name)
        for key, (default, bound) in optimizer_parameters(name).items():
            if bound is not None:
                field = bounded_field(bound, default)
            elif isinstance(default, bool):
                # A fixed parameter shows what the optimizer does and cannot be changed.
                field = forms.BooleanField(required=False, initial=default, disabled=key in fixed)
            elif key == "instructions":
                field = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
            else:
                field = forms.CharField(required=False, initial=default)
            field.label = key  # the guide's argument names, which users know from code
            field.help_text = optimizer_help(name, key)
            fields[prefix + key] = field
    fields["omega_language_model"].label = "language_model (default: the program's)"
    return fields


def _training_fields() -> dict[str, forms.Field]:
    fields = {
        key: bounded_field(TRAINING[key], TRAINING_DEFAULTS[key])
        for key in ("epochs", "batch_size", "validation_split")
    }
    fields["shuffle"] = forms.BooleanField(
        required=False, initial=TRAINING_DEFAULTS["shuffle"], help_text=TRAINING_HELP["shuffle"]
    )
    fields["seed"] = bounded_field(
        TRAINING["seed"], widget=forms.NumberInput(attrs={"placeholder": "random"})
    )
    for key, when in (("evaluations_before", "before"), ("evaluations_after", "after")):
        fields[key] = bounded_field(
            TRAINING[key], TRAINING_DEFAULTS[key], label=f"Evaluate N times {when} training"
        )
    return fields


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
        help_text="provider/name, e.g. local/smollm2 (offline), openai/gpt-4o-mini, ollama/llama3.",
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
        self.label_sets = {}
        chosen = self.initial.get("dataset")
        dataset = (
            self.fields["dataset"].queryset.filter(pk=chosen).first()
            if str(chosen or "").isdigit()
            else None
        )
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
            )
        except program_services.ProgramError as exc:
            message = str(exc)
            field = "model" if "model" in message.lower() else None
            if message.startswith("api_base"):  # the endpoint policy (services/endpoints.py)
                field = "api_base"
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


class RunForm(forms.Form):
    program = forms.ModelChoiceField(
        queryset=Program.objects.none(), help_text="The program whose variables are trained."
    )
    version = forms.IntegerField(
        required=False,
        min_value=1,
        label="Program version",
        help_text="Which version of the program to train (1 = as created); blank: its latest.",
    )
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        help_text="Its train split trains (and validates); its test split scores before/after.",
    )
    # Reward
    reward = forms.ChoiceField(
        choices=[(name, name) for name in REWARDS],
        initial="ExactMatch",
        help_text=(
            "Scores each prediction from 0 to 1: ExactMatch compares values, CosineSimilarity "
            "compares embeddings, LMAsJudge asks a model."
        ),
    )
    reward_in_mask = forms.CharField(
        required=False,
        label="in_mask",
        help_text="Comma-separated output fields to compare (default: the dataset's target fields).",
    )
    reward_out_mask = forms.CharField(
        required=False, label="out_mask", help_text="Comma-separated output fields to leave out."
    )
    reward_embedding_model = forms.CharField(
        required=False,
        label="Embedding model (CosineSimilarity)",
        help_text="Embeds both answers; default: the server's embedding model.",
    )
    reward_language_model = forms.CharField(
        required=False,
        label="Judge model (LMAsJudge)",
        help_text="The model that grades each answer; default: the program's model.",
    )
    reward_criteria = forms.CharField(
        required=False,
        label="Criteria (LMAsJudge)",
        initial="accuracy and completeness",
        help_text="What the judge grades the answers on, in plain words.",
    )
    reward_human_marks = forms.BooleanField(
        required=False,
        label="Judge by people",
        help_text="Predictions people marked on this dataset version count as marked; "
        "the reward above scores the rest.",
    )
    # Metrics
    metrics = forms.MultipleChoiceField(
        choices=[(name, name) for name in METRICS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Monitored on each epoch, not optimised.",
    )
    metrics_in_mask = forms.CharField(
        required=False,
        label="Metrics in_mask",
        help_text="Comma-separated output fields the metrics compare (default: the targets).",
    )
    # Optimizer (its parameters and the training loop's fields are added below the class)
    optimizer = forms.ChoiceField(
        choices=[(name, name) for name in OPTIMIZERS],
        initial="RandomFewShot",
        help_text=(
            "RandomFewShot samples few-shot examples (no extra LM calls); OMEGA also rewrites "
            "instructions with LM mutations and crossovers (more calls)."
        ),
    )
    #: The form's fieldsets (``partials/run_form_fields.html``), in order; each optimizer's
    #: parameters have a fieldset of their own (by prefix, ``rfs_``/``omega_``).
    GROUPS = {
        "basics": (
            "program",
            "version",
            "dataset",
            "reward",
            "optimizer",
            "epochs",
            "batch_size",
            "validation_split",
        ),
        "reward": (
            "reward_in_mask",
            "reward_out_mask",
            "reward_embedding_model",
            "reward_language_model",
            "reward_criteria",
            "reward_human_marks",
        ),
        "metrics": ("metrics", "metrics_in_mask"),
        "training": ("shuffle", "seed", "evaluations_before", "evaluations_after"),
        "budget": ("budget_calls", "budget_cost", "budget_minutes"),
    }
    #: Shown first; the rest of the form (but the budget) sits under "Advanced settings".
    BASIC = (*GROUPS["basics"], "rfs_nb_max_examples", "omega_instructions", *GROUPS["budget"])

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["program"].queryset = Program.objects.filter(owner=user)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=user)
        self.fields["omega_embedding_model"].initial = settings.TRAINBOARD_EMBEDDING_MODEL
        self.run_config = None
        self.presets = PRESETS
        self.version = None

    @cached_property
    def groups(self) -> dict[str, list]:
        """Bound fields of each of ``GROUPS`` (templates loop over ``form.groups.<name>``)."""
        return {name: [self[field] for field in fields] for name, fields in self.GROUPS.items()}

    def advanced_has_errors(self) -> bool:
        """Open "Advanced settings" when a field inside it needs correcting."""
        return any(name not in self.BASIC for name in self.errors if name != "__all__")

    def clean(self):
        data = super().clean()
        program, dataset = data.get("program"), data.get("dataset")
        if program is None or dataset is None:
            return data
        self.version = launch_version(program, data.get("version"))
        if self.version is None:
            self.add_error("version", f"“{program.name}” has no version {data.get('version')}.")
            return data
        try:
            engine_program = program_services.program_from_json(self.version.engine_json)
        except program_services.ProgramError as exc:
            self.add_error("program", str(exc))
            return data
        missing = program_services.missing_keys(engine_program)
        if missing:
            self.add_error("program", missing)
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
        if data.get("reward_human_marks") and not dataset.marks:
            self.add_error(
                "reward_human_marks",
                "This dataset version has no marks: mark predictions on a run's page and "
                "publish them as a new version first.",
            )
        return data


def launch_version(program: Program, number: int | None):
    """The version a launch trains: version ``number`` of ``program``, its latest if blank."""
    if number is None:
        return selectors.latest_version(program)
    return selectors.version_of(program, number)


def budget_fields() -> dict[str, forms.Field]:
    """The optional caps (``training.services.budget.BUDGET``); empty: no cap."""
    return {
        key: bounded_field(
            bound,
            label=budget.LABELS[key],
            widget=forms.NumberInput(attrs={"placeholder": "no cap"}),
        )
        for key, bound in budget.BUDGET.items()
    }


class ResumeBudgetForm(forms.Form):
    """New caps for a run stopped at one (``budget.resume_with_caps`` checks them against
    what the run used)."""

    def __init__(self, *args, run=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(budget_fields())
        if run is not None:
            for key, value in budget.caps_of(run.config).items():
                self.fields[key].initial = value


# Built from the engine's declarations, in the constructors' order, after the static fields.
RunForm.base_fields.update(_optimizer_fields())
RunForm.base_fields.update(_training_fields())
RunForm.base_fields.update(budget_fields())
RunForm.declared_fields = dict(RunForm.base_fields)
