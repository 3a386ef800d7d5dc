"""The branch form: the launch form (prefilled with the parent run's settings) plus the edits
of the candidate's value: new instructions, and keep / pin / remove for each example."""

from __future__ import annotations

import json

from django import forms

from training.forms import RunForm
from training.models import Candidate, Program, Run
from training.services import branching

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
