"""Programs, runs and what a run produces (epoch logs, candidates, evaluations).

A Program row stores the engine's own JSON document (``Program.get_config()``), so what the
dashboard exports is exactly what ``Program.load`` reads in code. A Run stores its validated
configuration as JSON plus everything the worker persists while it trains; the run page is
rendered from these rows alone, which is why a page opened mid-run shows everything so far.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone


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


class Run(models.Model):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"  # at a budget cap (training.execution.budget): resumable
    PAUSED = "paused"  # by its owner, after a batch (training.runs.launch.request_pause)
    STATUS_CHOICES = [
        (QUEUED, "Queued"),
        (RUNNING, "Running"),
        (SUCCEEDED, "Succeeded"),
        (FAILED, "Failed"),
        (CANCELLED, "Cancelled"),
        (STOPPED, "Stopped"),
        (PAUSED, "Paused"),
    ]
    ACTIVE = (QUEUED, RUNNING)
    FINISHED = (SUCCEEDED, FAILED, CANCELLED, STOPPED)
    RESUMABLE = (FAILED, CANCELLED, STOPPED, PAUSED)
    # What a finished run's training came to (``summaries.outcome``): the trained program
    # against its seed, on the test split's paired interval; "" before it is known.
    IMPROVED = "improved"
    NO_BETTER = "no_better"  # no candidate beat the seed beyond noise: the seed is the result
    WITHIN_NOISE = "within_noise"  # the program changed; the test split cannot tell
    WORSE = "worse"  # lower than the seed on test beyond noise
    OUTCOME_CHOICES = [
        (IMPROVED, "Improved"),
        (NO_BETTER, "No better than the seed"),
        (WITHIN_NOISE, "Changed, within noise on test"),
        (WORSE, "Worse than the seed"),
    ]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    program = models.ForeignKey(Program, on_delete=models.PROTECT, related_name="runs")
    # The version the run trains (None: version 1, the program as created).
    program_version = models.ForeignKey(
        ProgramVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    dataset = models.ForeignKey("datasets.Dataset", on_delete=models.PROTECT, related_name="runs")
    # The owner's own words (training.runs.run_management): shown, never executed.
    name = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    archived = models.BooleanField(default=False, db_index=True)
    # Validated launch configuration (see training.execution.run_config).
    config = models.JSONField()
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=QUEUED, db_index=True)
    outcome = models.CharField(max_length=12, choices=OUTCOME_CHOICES, blank=True)
    error = models.TextField(blank=True)
    # Which phase the worker is in: "baseline", "training", "final", "" (not started / done).
    phase = models.CharField(max_length=20, blank=True)
    # Incremented by every launch/resume; a task whose attempt differs is stale and exits.
    attempt = models.PositiveIntegerField(default=1)
    # Resumes made without a person after the run's worker was lost (at most
    # TRAINBOARD_AUTO_RESUMES; training.execution.liveness.reaper).
    auto_resumes = models.PositiveIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    worker_pid = models.IntegerField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Pause pressed: the worker stops after the current batch (its checkpoint saved there,
    # ``checkpoint_position``) and the run is "paused", its slot free; Resume continues from
    # that point.
    pause_requested = models.BooleanField(default=False)
    # Paused because Trainboard itself stopped (``make run`` on Ctrl-C or SIGTERM), not by
    # its owner: the next start resumes it (training.execution.liveness.shutdown).
    resume_at_start = models.BooleanField(default=False)
    # Candidates people wrote for the live population (training.runs.hand_candidates):
    # [{"n", "variable", "parent", "value", "state": "queued"|"added"|"refused", "note"}].
    hand_candidates = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The run's working clock: this attempt's start less the working seconds of
    # the earlier ones (``active_seconds`` when it was claimed), so ``duration`` counts the
    # attempts' running time only, never the time a run waited stopped, paused or queued.
    clock_started_at = models.DateTimeField(null=True, blank=True)
    # When this attempt's fit began, and how many batches (over all epochs) were already done
    # then (a resume starts part-way): the ETA is drawn from the batches done since.
    training_started_at = models.DateTimeField(null=True, blank=True)
    training_start_batch = models.IntegerField(default=0)
    # Progress
    current_epoch = models.IntegerField(default=0)  # epochs completed
    current_batch = models.IntegerField(default=0)  # batches completed in the current epoch
    batches_per_epoch = models.IntegerField(default=0)
    # Usage totals (training.engine.language_models.usage.Usage.to_dict(), summed over attempts).
    usage = models.JSONField(default=dict)
    lm_calls = models.IntegerField(default=0)
    lm_failures = models.IntegerField(default=0)
    failed_predictions = models.IntegerField(default=0)
    # LM calls past the run's trace cap (TRAINBOARD_TRACE_MAX_CALLS): counted, not stored.
    traces_dropped = models.PositiveIntegerField(default=0)
    # Results
    baseline_reward = models.FloatField(null=True, blank=True)
    final_reward = models.FloatField(null=True, blank=True)
    best_reward = models.FloatField(null=True, blank=True)
    trained_program_json = models.JSONField(null=True, blank=True)
    # A few test-split answers of the trained program: [{"inputs", "expected", "predicted"}].
    samples = models.JSONField(default=list, blank=True)
    # Resume: the program (variables + optimizer state) after the last completed epoch, or
    # where Pause stopped it inside an epoch: then ``checkpoint_position`` is the engine's
    # ``PausePoint`` (the next batch of that epoch, its rewards, metric states and predictions
    # so far) and ``checkpoint_epoch`` still the last completed epoch (None: none yet).
    checkpoint_json = models.JSONField(null=True, blank=True)
    checkpoint_epoch = models.IntegerField(null=True, blank=True)
    checkpoint_position = models.JSONField(null=True, blank=True)
    # Branching (training.runs.branching): the run and candidate this run started from.
    parent_run = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="branches"
    )
    parent_candidate = models.ForeignKey(
        "Candidate", on_delete=models.SET_NULL, null=True, blank=True, related_name="branches"
    )
    # The forecast made at launch (training.execution.forecast), shown against the actual.
    forecast = models.JSONField(null=True, blank=True)
    # Seconds the run's attempts spent working (the budget's minutes; training.execution.budget).
    active_seconds = models.FloatField(default=0.0)
    # The optimizer's last selection, per variable: {variable: {"candidates", "beat_seed",
    # "margin", "seed_reward", "champion_id", "champion_reward", "epoch"}} (its ``selection``
    # event): how many candidates beat the seed beyond noise.
    selection = models.JSONField(default=dict, blank=True)
    # What the optimizer refused before scoring (OMEGA's junk rewrites, its
    # ``candidate_refused`` events), bounded: {"count", "rules": {rule: {"reason", "count",
    # "latest": [{"text", "operation", "variable", "field", "epoch"}]}}}
    # (training.execution.refusals).
    refusals = models.JSONField(default=dict, blank=True)
    # The choice on the selection split (``fit(selection_split=...)``), per variable: the
    # engine's ``final_selection`` event {"contenders", "top_k", "selection_samples",
    # "margin", "validation_best_id", "chosen_id", "chosen_reward", "chosen_selection_reward"}.
    final_selection = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"Run #{self.pk} ({self.program.name})"

    def get_absolute_url(self) -> str:
        return reverse("training:run-detail", args=[self.pk])

    @classmethod
    def lock_before_its_rows(cls, pk: int) -> bool:
        """In a transaction that writes several of run ``pk``'s rows (candidates, logs...):
        lock the run's row first (``FOR NO KEY UPDATE``), as deleting a run does (``FOR
        UPDATE``, ``training.runs.run_management``). Two such transactions then queue on one
        row; without it each could hold a candidate the other wants, a deadlock on
        PostgreSQL (nothing on SQLite, which locks the database). Inserts that only point at
        the run (``FOR KEY SHARE``) do not wait for it.

        Returns:
            False when the run is gone (deleted meanwhile): there is nothing to write.
        """
        locked = cls.objects.select_for_update(no_key=True).filter(pk=pk)
        return locked.values_list("pk", flat=True).first() is not None

    @property
    def group_name(self) -> str:
        return f"run.{self.pk}"

    @property
    def display_name(self) -> str:
        return self.name or f"Run #{self.pk}"

    @property
    def launch_json(self) -> dict:
        """The engine JSON this run starts from: its program version's, else version 1's."""
        if self.program_version_id is not None:
            return self.program_version.engine_json
        return self.program.engine_json

    @property
    def tag_names(self) -> list[str]:
        return [tag.name for tag in self.tags.all()]

    @property
    def epochs(self) -> int:
        return int(self.config.get("epochs", 1))

    @property
    def optimizer_name(self) -> str:
        return (self.config.get("optimizer") or {}).get("name", "")

    @property
    def takes_candidates_by_hand(self) -> bool:
        """Whether the run's optimizer lets a person add a candidate (its card says)."""
        from training import optimizer_registry

        name = self.optimizer_name
        return optimizer_registry.offered(name) and optimizer_registry.card(name).takes_by_hand

    @property
    def model_name(self) -> str:
        return self.config.get("model") or self.program.model

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def can_resume(self) -> bool:
        if self.status in (self.STOPPED, self.PAUSED):  # from its checkpoint, or the start
            return True
        return self.status in (self.FAILED, self.CANCELLED) and self.checkpoint_json is not None

    @property
    def can_pause(self) -> bool:
        """Queued, or running with training still to do (an epoch under way or to come)."""
        if self.status not in self.ACTIVE or self.cancel_requested or self.pause_requested:
            return False
        return self.status == self.QUEUED or self.current_epoch < self.epochs

    @property
    def paused_inside_epoch(self) -> dict | None:
        """Where a pause stopped the run inside an epoch: ``{"epoch", "batch"}`` (both
        counted from 1: the batches done), or None when its checkpoint is at an epoch's end."""
        point = self.checkpoint_position if self.checkpoint_json is not None else None
        if not isinstance(point, dict) or not point.get("batch"):
            return None
        return {"epoch": int(point.get("epoch", 0)) + 1, "batch": int(point["batch"])}

    @property
    def duration(self):
        return self.duration_at(timezone.now())

    def duration_at(self, now):
        """The time the run's attempts ran (None before the first): from the working clock
        (``clock_started_at``) to the end of the last attempt, or now while one runs; a run
        queued again after a stop shows what its attempts ran, not ticking. Runs from before
        the clock existed count from their first start."""
        if not self.started_at:
            return None
        if self.clock_started_at is None:
            end = self.finished_at or now
            return end - self.started_at
        if self.status == self.QUEUED:
            return timedelta(seconds=max(0.0, float(self.active_seconds or 0.0)))
        end = self.finished_at or now
        return max(timedelta(0), end - self.clock_started_at)

    @property
    def status_label(self) -> str:
        """What a status badge says: a succeeded run's outcome when it has one (a run that
        got worse, or kept its seed, never reads as a plain success)."""
        if self.status == self.SUCCEEDED and self.outcome:
            return self.get_outcome_display()
        return self.get_status_display()

    @property
    def improvement(self) -> float | None:
        """Test reward after minus test reward before (None until both exist).

        Never the best validation/training reward: that is another split."""
        if self.baseline_reward is None or self.final_reward is None:
            return None
        return self.final_reward - self.baseline_reward

    @property
    def best_reward_split(self) -> str:
        """Which split ``best_reward`` was measured on (``summaries.best_of_history``)."""
        return "validation" if float(self.config.get("validation_split") or 0) > 0 else "training"


class RunTag(models.Model):
    """A label the owner put on a run (the runs list filters by it); goes with the run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=40)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="runtag_unique")]

    def __str__(self) -> str:
        return self.name


class EpochLog(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="epoch_logs")
    epoch = models.IntegerField()
    logs = models.JSONField()  # {"reward": .., "val_reward": .., "<metric>": ..}
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["epoch"]
        constraints = [models.UniqueConstraint(fields=["run", "epoch"], name="epochlog_unique")]


class CandidateManager(models.Manager):
    """Candidates without their stored predictions (up to 100 outputs each, read only by
    re-scoring, which asks for them with ``defer(None)``): lists and pages stay as light as
    before they were kept."""

    def get_queryset(self):
        return super().get_queryset().defer("example_predictions")


class Candidate(models.Model):
    objects = CandidateManager()

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="candidates")
    variable = models.CharField(max_length=200)
    candidate_id = models.CharField(max_length=50)
    parent_ids = models.JSONField(default=list)
    operation = models.CharField(max_length=20)
    value = models.JSONField()
    reward = models.FloatField(null=True, blank=True)
    novelty = models.FloatField(null=True, blank=True)
    status = models.CharField(max_length=20)
    epoch = models.IntegerField(default=0)
    # The population map's data: the candidate's embedding (bounded by the engine's
    # utils.projection.compact_embedding; OMEGA's DNS sends it, a RandomFewShot run's are
    # computed once when its map is first opened) and the epoch of the competition that set
    # ``status`` (kept/dropped), so the map can show each epoch's population.
    embedding = models.JSONField(null=True, blank=True)
    status_epoch = models.IntegerField(null=True, blank=True)
    # What scoring it measured (the engine's ``trainers/candidate_scores.py``, in its
    # ``candidate`` event): each scoring example's reward in order (at most
    # ``MAX_EXAMPLE_REWARDS``; what the run page's intervals and paired verdicts bootstrap),
    # the prediction calls made, their mean prompt tokens and seconds per call; and its mean
    # reward on the selection split when it was a contender there.
    example_rewards = models.JSONField(null=True, blank=True)
    scoring_calls = models.IntegerField(null=True, blank=True)
    prompt_tokens_per_call = models.FloatField(null=True, blank=True)
    latency_per_call = models.FloatField(null=True, blank=True)
    selection_reward = models.FloatField(null=True, blank=True)
    # Each scoring example's prediction (output JSON, None where it failed), in the scoring
    # set's order, bounded (``training/execution/recording/candidate_predictions.py``): what
    # re-scores the candidate on corrected answers or another reward with no program call.
    example_predictions = models.JSONField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-reward", "epoch", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "variable", "candidate_id"], name="candidate_unique"
            )
        ]

    def get_absolute_url(self) -> str:
        return reverse("training:candidate-detail", args=[self.run_id, self.pk])

    def parents(self) -> list[Candidate]:
        """The stored parents in ``parent_ids`` order (two for a crossover)."""
        if not self.parent_ids:
            return []
        found = {
            c.candidate_id: c
            for c in Candidate.objects.filter(
                run_id=self.run_id, variable=self.variable, candidate_id__in=self.parent_ids
            )
        }
        return [found[cid] for cid in self.parent_ids if cid in found]


class Ablation(models.Model):
    """The final program of a finished run scored without one part of its prompt (an
    instruction sentence or a few-shot example, ``training.insight.ablation``), on the
    examples its final candidate was scored on, paired with that candidate's stored rewards.

    One row per run, variable and part (``key``): a second ask is answered from it, at no
    cost. The worker (``training.execution.ablation``) fills the result in.
    """

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="ablations")
    variable = models.CharField(max_length=200)
    kind = models.CharField(max_length=10)  # "sentence" or "example"
    key = models.CharField(max_length=64)  # sha256 of the part (``ablation.piece_key``)
    value = models.JSONField()  # the variable's value without the part
    split = models.CharField(max_length=12)  # the split scored ("validation", "training")
    rows = models.PositiveIntegerField()  # examples scored (paired with the final's)
    forecast_calls = models.PositiveIntegerField()
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default=QUEUED)
    error = models.TextField(blank=True)
    calls = models.PositiveIntegerField(null=True, blank=True)  # LM calls it made
    example_rewards = models.JSONField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)  # mean without the part
    full_reward = models.FloatField(null=True, blank=True)  # mean with it, same examples
    difference = models.FloatField(null=True, blank=True)  # without − with
    low = models.FloatField(null=True, blank=True)  # paired bootstrap interval of it
    high = models.FloatField(null=True, blank=True)
    within_noise = models.BooleanField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "variable", "key"], name="ablation_unique")
        ]

    @property
    def pending(self) -> bool:
        return self.status in (self.QUEUED, self.RUNNING)


class OptimizerError(models.Model):
    """An optimizer step that failed and was skipped (an ``optimizer_error`` engine event),
    e.g. an OMEGA mutation whose LM call failed: fit went on, the run page lists it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="optimizer_errors")
    epoch = models.IntegerField(default=0)
    variable = models.CharField(max_length=200, blank=True)
    operation = models.CharField(max_length=20, blank=True)
    error = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]


class Evaluation(models.Model):
    BEFORE = "before"
    AFTER = "after"
    PHASE_CHOICES = [(BEFORE, "Before training"), (AFTER, "After training")]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    phase = models.CharField(max_length=6, choices=PHASE_CHOICES)
    index = models.IntegerField()
    metrics = models.JSONField()  # {"reward": .., "<metric>": ..}
    # One reward per test example, in the test split's order (callbacks.ExampleRewards): the
    # paired bootstrap pairs them with the other phase's, example by example.
    example_rewards = models.JSONField(default=list, blank=True)
    failures = models.IntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "phase", "index"], name="evaluation_unique")
        ]


class LMCallTrace(models.Model):
    """One LM or embedding call of a run (:class:`training.engine.language_models.tracing.CallTrace`).

    Written in bulk by :mod:`training.execution.recording.traces`; bounded per run by
    ``TRAINBOARD_TRACE_MAX_CALLS`` (later calls are counted in ``Run.traces_dropped``) and per
    text by ``TRAINBOARD_TRACE_MAX_CHARS``; secrets are scrubbed by the engine before a row
    exists. Everything here came from or went to an LM: shown escaped, never ``|safe``.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="call_traces")
    attempt = models.PositiveIntegerField(default=1)
    seq = models.PositiveIntegerField()  # order of the call in the run, over its attempts
    role = models.CharField(max_length=20)  # engine tracing.ROLES
    kind = models.CharField(max_length=20)  # completion | embedding | memo
    model = models.CharField(max_length=200)
    candidate_id = models.CharField(max_length=64, blank=True)
    example_index = models.IntegerField(null=True, blank=True)
    split = models.CharField(max_length=20, blank=True)  # train | validation | test
    phase = models.CharField(max_length=40, blank=True)  # before | after (test evaluations)
    epoch = models.IntegerField(null=True, blank=True)
    messages = models.JSONField(default=list)
    response = models.TextField(null=True, blank=True)
    parsed = models.TextField(null=True, blank=True)
    error = models.TextField(blank=True)
    failed = models.BooleanField(default=False)
    latency = models.FloatField(default=0.0)
    attempts = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True)
    cache_hit = models.BooleanField(default=False)
    memo_hit = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq", "id"]
        indexes = [
            models.Index(fields=["run", "seq"]),
            models.Index(fields=["run", "role"]),
            models.Index(fields=["run", "candidate_id"]),
            models.Index(fields=["run", "failed"]),
            models.Index(fields=["run", "split", "example_index"]),
        ]

    def __str__(self) -> str:
        return f"{self.role} call #{self.seq} of run {self.run_id}"

    def get_absolute_url(self) -> str:
        return reverse("training:trace-detail", args=[self.run_id, self.pk])


class EvaluationExample(models.Model):
    """One test example's prediction in one evaluation (the run page's per-example table).

    The reward is ``Evaluation.example_rewards[example_index]``'s copy; the inputs and expected
    output are the dataset's test row ``example_index`` (not copied). ``prediction`` is the
    output's JSON with each text cut to
    ``training.execution.recording.evaluation_examples.MAX_CHARS``; it came from an LM: shown
    escaped, never ``|safe``.
    """

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="examples")
    example_index = models.IntegerField()  # position in the dataset's test split
    prediction = models.JSONField(null=True, blank=True)  # None: the prediction failed
    error = models.CharField(max_length=500, blank=True)
    reward = models.FloatField(default=0.0)

    class Meta:
        ordering = ["evaluation", "example_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "example_index"], name="evaluation_example_unique"
            )
        ]


class ModelPace(models.Model):
    """A model's measured pace where this installation's workers run it.

    Written by workers only (``training.execution.pace.calibration``): a short calibration the
    first time a forecast needs the model, then refined by every run they finish on it. The
    launch form's forecast reads it and never waits on a worker. ``pace``: the engine's
    ``training.engine.pace.Pace`` as JSON; ``sizes``: tokens per call by role (``judge``,
    ``mutation``) measured in recent runs' traces.
    """

    model = models.CharField(max_length=200, unique=True)
    pace = models.JSONField(default=dict)
    sizes = models.JSONField(default=dict)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"pace of {self.model}"


class RescoreJob(models.Model):
    """A judge re-score of a finished run (``training.insight.rescore_jobs``): asked for on
    the run page after its forecast of judge calls, done in a worker, its result kept here
    for the page (the run's own figures never change)."""

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rescore_jobs")
    version = models.ForeignKey("datasets.Dataset", on_delete=models.CASCADE, related_name="+")
    spec = models.JSONField()  # the reward specification scored with
    judge_calls = models.IntegerField(default=0)  # the forecast shown before it was asked
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    result = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    @property
    def pending(self) -> bool:
        return self.status in (self.QUEUED, self.RUNNING)
