"""What a user trains: a program (the engine's own JSON document), its saved versions, and
the endpoints its models may be called at.

A Program row stores the engine's own JSON document (``Program.get_config()``), so what the
dashboard exports is exactly what ``Program.load`` reads in code.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class Program(models.Model):
    GENERATOR = "Generator"
    CHAIN_OF_THOUGHT = "ChainOfThought"
    MODULE_CHOICES = [(GENERATOR, "Generator"), (CHAIN_OF_THOUGHT, "ChainOfThought")]
    SOURCE_FORM = "form"
    SOURCE_IMPORT = "import"
    SOURCE_RUN = "run"
    SOURCE_BRANCH = "branch"
    SOURCE_CHOICES = [
        (SOURCE_FORM, "Built in the dashboard"),
        (SOURCE_IMPORT, "Imported JSON"),
        (SOURCE_RUN, "Trained by a run"),
        (SOURCE_BRANCH, "Branched from a candidate"),
    ]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="programs"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    dataset = models.ForeignKey(
        "datasets.Dataset",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="programs",
    )
    module = models.CharField(max_length=20, choices=MODULE_CHOICES, default=GENERATOR)
    instructions = models.TextField(blank=True)
    model = models.CharField(max_length=200)
    api_base = models.CharField(max_length=300, blank=True)
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=10, choices=SOURCE_CHOICES, default=SOURCE_FORM)
    # The engine's saved-program document (Program.get_config()).
    engine_json = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("training:program-detail", args=[self.pk])


class Endpoint(models.Model):
    """A model server someone saved: a name, a URL and optionally its own key.

    ``owner`` None: shared, saved by an administrator for everyone. The key is stored only
    encrypted (``training.programs.endpoint_keys``: Fernet keyed from SECRET_KEY) and never
    shown again; programs name the endpoint (``"endpoint"`` in a model's config), never the
    key, so exports and traces never carry it.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="endpoints",
    )
    name = models.CharField(max_length=100)
    url = models.CharField(max_length=300)
    encrypted_key = models.TextField(blank=True)  # a Fernet token, or "" for no key
    # How its models are asked for structured output (LanguageModel(structured_output=…)).
    STRUCTURED_OUTPUT_CHOICES = [
        ("auto", "Ask litellm (known hosted models)"),
        ("json_object", "JSON object with its schema (llama.cpp server, Ollama, vLLM)"),
        ("response_format", "JSON schema response format (OpenAI, LM Studio, vLLM)"),
        ("prompt", "Schema in the prompt only"),
    ]
    structured_output = models.CharField(
        max_length=20, choices=STRUCTURED_OUTPUT_CHOICES, default="json_object"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="endpoint_unique_per_owner"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="endpoint_unique_shared",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def shared(self) -> bool:
        return self.owner_id is None

    @property
    def has_key(self) -> bool:
        return bool(self.encrypted_key)


class ProgramVersion(models.Model):
    """One version of a program's engine JSON, with its lineage.

    Version 1 is the program as created (``Program.engine_json``, written by the
    ``post_save`` handler in ``training.programs.program_versions``); each later version is
    the trained program of a finished run ("Save as new program version"), with the test
    reward that run measured. The program row itself never changes, so version 1 stays.
    """

    program = models.ForeignKey(Program, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    engine_json = models.JSONField()
    # The run whose trained program this is (None for version 1, or once that run is deleted:
    # ``source_run_number`` keeps its number for the lineage).
    source_run = models.OneToOneField(
        "Run",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="promoted_version",
    )
    source_run_number = models.PositiveIntegerField(null=True, blank=True)
    # The version that run started from (the parent in the lineage).
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    # A candidate saved as this version ("use this one" on the run page: a cheaper candidate
    # within noise of the best, ``training.runs.candidate_versions``); None for a run's
    # trained program. Its run is ``source_run_number``.
    source_candidate = models.ForeignKey(
        "Candidate",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="saved_versions",
    )
    test_reward = models.FloatField(null=True, blank=True)  # the source run's test reward after
    baseline_reward = models.FloatField(null=True, blank=True)  # ... and before training
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["program", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["program", "number"], name="programversion_unique")
        ]

    def __str__(self) -> str:
        return f"{self.program.name} v{self.number}"

    def get_absolute_url(self) -> str:
        return f"{self.program.get_absolute_url()}?version={self.number}"
