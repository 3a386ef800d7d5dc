"""Forms of runs: launch a run, resume it with new budget caps, branch it (the launch form
prefilled with the parent run's settings plus the edits of the candidate's value).

The launch form's numbers are typed, bounded fields built from the engine's own declarations
(``training.engine.bounds`` objects, read through ``training.execution.run_config``): their
``min_value``/``max_value`` become the HTML ``min``/``max`` the browser enforces and the
check the server runs, with the engine's wording, and their initial values are the engine's
signature defaults. ``run_config.validate_run_config`` then builds the engine objects, whose
constructors have the last word; what they refuse is put on the field it is about.
"""

from __future__ import annotations

import copy
import json
from functools import cached_property, lru_cache

from django import forms
from django.conf import settings

from datasets import selectors as dataset_selectors
from datasets import versions
from datasets.models import Dataset
from training import optimizer_registry
from training.engine import bounds
from training.execution import budget
from training.execution.run_config import (
    METRICS,
    REWARDS,
    TRAINING,
    TRAINING_DEFAULTS,
    TRAINING_HELP,
    RunConfigError,
    optimizer_fixed,
    optimizer_help,
    optimizer_parameters,
    presets,
    validate_run_config,
)
from training.models import Candidate, Program, Run
from training.programs import programs as program_services
from training.programs import selectors
from training.runs import branching


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
    for name in optimizer_registry.names():
        prefix = optimizer_registry.card(name).prefix
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
            if key == "language_model":
                field.label = "language_model (default: the program's)"
            field.help_text = optimizer_help(name, key)
            if key == "embedding_model":
                field.initial = settings.TRAINBOARD_EMBEDDING_MODEL
            fields[prefix + key] = field
    return fields


def _training_fields() -> dict[str, forms.Field]:
    fields = {
        key: bounded_field(TRAINING[key], TRAINING_DEFAULTS[key])
        for key in ("epochs", "batch_size", "validation_split", "selection_split")
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
    dataset_version = forms.IntegerField(
        required=False,
        min_value=1,
        label="Dataset version",
        help_text="Which version of the dataset (v1 = as imported; corrections make the next); "
        "blank: its latest.",
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
    # Optimizer: its choices and help, each offered optimizer's parameters and the training
    # loop's fields are the registry's as it is when a form is made (``launch_fields``).
    optimizer = forms.ChoiceField()
    #: The form's fieldsets (``partials/run_form_fields.html``), in order; each optimizer's
    #: parameters have a fieldset of their own (``optimizer_sections``).
    GROUPS = {
        "basics": (
            "program",
            "version",
            "dataset",
            "dataset_version",
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
        "training": (
            "selection_split",
            "shuffle",
            "seed",
            "evaluations_before",
            "evaluations_after",
        ),
        "budget": ("budget_calls", "budget_cost", "budget_minutes"),
    }
    #: Shown first, with each optimizer's primary parameter (its card's); the rest of the
    #: form (but the budget) sits under "Advanced settings".
    BASIC = (*GROUPS["basics"], *GROUPS["budget"])

    def __init__(self, *args, user=None, **kwargs):
        # Django copies ``base_fields`` into ``self.fields``: the registry's fields as it is
        # now (a setting changed since import, as a test's, is followed).
        self.base_fields = launch_fields()
        super().__init__(*args, **kwargs)
        self.fields["program"].queryset = Program.objects.filter(owner=user)
        self.fields["dataset"].queryset = Dataset.objects.filter(owner=user)
        self._dataset_lines(user)
        self.run_config = None
        self.presets = presets(selectors.answers_labels(self.initial.get("program")))
        self.version = None

    def _dataset_lines(self, user) -> None:
        """The dataset choice lists each dataset once (its latest version; any version's id
        is accepted and ``dataset_version`` says which one is used). A program's dataset
        (often v1) opens as its line's latest."""
        lines = dataset_selectors.dataset_lines(user)
        latest = {line.root_id or line.pk: line for line in lines}
        chosen = self.initial.get("dataset")
        if chosen and not self.is_bound:
            found = Dataset.objects.filter(owner=user, pk=chosen).first()
            if found is not None:
                newest = latest.get(found.root_id or found.pk)
                self.initial["dataset"] = newest.pk if newest else found.pk
        self.fields["dataset"].widget.choices = [("", "---------")] + [
            (line.pk, f"{line.name} (v{line.version}, latest)") for line in lines
        ]

    @cached_property
    def optimizer_sections(self) -> list[dict]:
        """Each offered optimizer's fields (``partials/run_form_fields.html``): its primary
        parameter (shown with the basics) and the others (under advanced settings), and
        whether it is the one chosen now."""
        chosen = self["optimizer"].value()
        sections = []
        for name in optimizer_registry.names():
            card = optimizer_registry.card(name)
            mine = [f for f in self if f.name.startswith(card.prefix)]
            sections.append(
                {
                    "name": name,
                    "chosen": chosen == name,
                    "primary": [f for f in mine if f.name == card.prefix + card.primary],
                    "others": [f for f in mine if f.name != card.prefix + card.primary],
                }
            )
        return sections

    @cached_property
    def groups(self) -> dict[str, list]:
        """Bound fields of each of ``GROUPS`` (templates loop over ``form.groups.<name>``)."""
        return {name: [self[field] for field in fields] for name, fields in self.GROUPS.items()}

    def advanced_has_errors(self) -> bool:
        """Open "Advanced settings" when a field inside it needs correcting."""
        primaries = {
            optimizer_registry.field_name(name, optimizer_registry.card(name).primary)
            for name in optimizer_registry.names()
        }
        basic = {*self.BASIC, *primaries}
        return any(name not in basic for name in self.errors if name != "__all__")

    def clean(self):
        data = super().clean()
        program, dataset = data.get("program"), data.get("dataset")
        if program is None or dataset is None:
            return data
        number = data.get("dataset_version")
        dataset = versions.version_in_line(dataset, number)
        if dataset is None:
            self.add_error("dataset_version", f"This dataset has no version {number}.")
            return data
        data["dataset"] = dataset
        self.version = selectors.version_or_latest(program, data.get("version"))
        if self.version is None:
            self.add_error("version", f"“{program.name}” has no version {data.get('version')}.")
            return data
        try:
            # with its owner: a saved endpoint it names must exist (and its key be readable)
            engine_program = program_services.program_from_json(
                self.version.engine_json, owner=program.owner
            )
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
        if self.run_config is not None:
            self.run_config["dataset_version"] = {
                "number": dataset.version,
                "pinned": number is not None,
            }
        if data.get("reward_human_marks") and not dataset.marks:
            self.add_error(
                "reward_human_marks",
                "This dataset version has no marks: mark predictions on a run's page and "
                "publish them as a new version first.",
            )
        return data


def budget_fields() -> dict[str, forms.Field]:
    """The optional caps (``training.execution.budget.BUDGET``); empty: no cap."""
    return {
        key: bounded_field(
            bound,
            label=budget.LABELS[key],
            widget=forms.NumberInput(attrs={"placeholder": "no cap"}),
        )
        for key, bound in budget.BUDGET.items()
    }


class ResumeBudgetForm(forms.Form):
    """New caps for a run stopped at one (``launch.resume_with_caps`` checks them against
    what the run used)."""

    def __init__(self, *args, run=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.update(budget_fields())
        if run is not None:  # an offer it accepts: above what the run has used
            for key, value in budget.suggested_caps(run).items():
                self.fields[key].initial = value


#: The launch form's own declared fields (before the registry's are added).
_DECLARED = dict(RunForm.base_fields)


def launch_fields() -> dict[str, forms.Field]:
    """Every field of the launch form for the optimizers offered now (``TRAINBOARD_OPTIMIZERS``
    through ``optimizer_registry``): the declared ones, the optimizer choice with its help,
    each optimizer's parameters (built from the engine's declarations, in the constructors'
    order), the training loop's and the budget's. Forms copy them (never change these)."""
    offered = tuple(optimizer_registry.classes().values())
    return _launch_fields(offered, settings.TRAINBOARD_EMBEDDING_MODEL)


@lru_cache(maxsize=8)
def _launch_fields(offered: tuple[type, ...], embedding_model: str) -> dict[str, forms.Field]:
    """``launch_fields`` for the ``offered`` classes; ``embedding_model`` (the setting an
    embedding field's initial value reads) is part of the cache key only."""
    fields = dict(_DECLARED)
    choice = copy.deepcopy(_DECLARED["optimizer"])
    choice.choices = [(cls.__name__, cls.__name__) for cls in offered]
    choice.initial = optimizer_registry.recommended(label_task=False)
    choice.help_text = " ".join(f"{cls.__name__} {cls.CARD.help}" for cls in offered)
    fields["optimizer"] = choice
    fields.update(_optimizer_fields())
    fields.update(_training_fields())
    fields.update(budget_fields())
    return fields


# Subclasses (BranchForm) inherit the full set; each form is made with ``launch_fields()``.
RunForm.base_fields = launch_fields()
RunForm.declared_fields = dict(RunForm.base_fields)


EXAMPLE_CHOICES = [
    ("keep", "keep"),
    ("pin", "pin (stays in every candidate)"),
    ("remove", "remove"),
]


class BranchForm(RunForm):
    """``RunForm`` for a branch of ``run`` from ``candidate``: the program is the run's (its
    branch copy is made on launch), the dataset any of the user's (e.g. a corrected version).
    """

    def __init__(self, *args, user=None, run: Run, candidate: Candidate, **kwargs):
        kwargs.setdefault("initial", branching.initial_from_config(run))
        super().__init__(*args, user=user, **kwargs)
        self.fields["program"].queryset = Program.objects.filter(pk=run.program_id, owner=user)
        self.fields["program"].widget = forms.HiddenInput()
        self.fields["program"].initial = run.program_id
        self.fields["version"].widget = forms.HiddenInput()  # the candidate is the start
        value = candidate.value or {}
        self.has_instructions = "instructions" in value
        if self.has_instructions:
            self.fields["branch_instructions"] = forms.CharField(
                required=False,
                label="Instructions",
                initial=value.get("instructions", ""),
                max_length=branching.MAX_INSTRUCTIONS_CHARS,
                widget=forms.Textarea(attrs={"rows": 6}),
            )
        pinned = branching.pinned_in_program(run, candidate.variable)
        self.examples = []
        for index, example in enumerate(value.get("examples") or []):
            name = f"example_{index}"
            self.fields[name] = forms.ChoiceField(
                choices=EXAMPLE_CHOICES,
                initial="pin" if example in pinned else "keep",
                label=f"Example {index + 1}",
                widget=forms.RadioSelect,
            )
            self.examples.append(
                {
                    "field": name,
                    "inputs": json.dumps(example.get("inputs"), indent=1, ensure_ascii=False),
                    "outputs": json.dumps(example.get("outputs"), indent=1, ensure_ascii=False),
                }
            )

    def __iter__(self):  # the run form's field loops skip the edit fields
        for name in self.fields:
            if name != "branch_instructions" and not name.startswith("example_"):
                yield self[name]

    def example_fields(self):
        return [(self[item["field"]], item) for item in self.examples]

    def edits(self) -> branching.Edits:
        data = self.cleaned_data
        return branching.Edits(
            instructions=data.get("branch_instructions") if self.has_instructions else None,
            examples=[data.get(item["field"]) or "keep" for item in self.examples],
        )
