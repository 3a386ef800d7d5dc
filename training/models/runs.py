"""A run: one training of a program on a dataset, with its validated configuration, its
state and everything its worker stores on it as it trains; its tags.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from training.models import run_json
from training.models.programs import Program, ProgramVersion


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

    # Who executes it: a worker of this dashboard, or the owner's own code, which streams
    # its fit in (``callbacks.RemoteMonitor``, ``training.runs.from_code``): never resumed or
    # re-sent here, failed when that code goes quiet.
    DASHBOARD = "dashboard"
    CODE = "code"
    SOURCE_CHOICES = [(DASHBOARD, "Dashboard"), (CODE, "From code")]

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
    source = models.CharField(max_length=10, choices=SOURCE_CHOICES, default=DASHBOARD)
    notes = models.TextField(blank=True)
    archived = models.BooleanField(default=False, db_index=True)
    # Validated launch configuration (see training.execution.run_config).
    config = models.JSONField()
    # The shape of the run's JSON (config, usage, checkpoint...): training.models.run_json.
    json_version = models.PositiveSmallIntegerField(default=run_json.VERSION)
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
    # Candidates people wrote for the live population: ``hand_candidates``, a table of its
    # own (training.models.hand_candidates).
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
    # The current epoch's running training logs, batch by batch (the history chart's line
    # while an epoch is under way): {"epoch", "batches", "points": [[batches done, reward]]};
    # None between epochs.
    epoch_so_far = models.JSONField(null=True, blank=True)
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
    # Resume: ``checkpoint``, a table of its own (training.models.checkpoints), read through
    # ``checkpoint_json``, ``checkpoint_epoch`` and ``checkpoint_position`` below.
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
    def saved_checkpoint(self):
        """The run's ``RunCheckpoint`` (None when it has none yet); read once per instance
        (``refresh_from_db`` reads it again)."""
        try:
            return self.checkpoint
        except models.ObjectDoesNotExist:
            return None

    @property
    def checkpoint_json(self) -> dict | None:
        """The program Resume goes on from (variables + optimizer state), or None."""
        saved = self.saved_checkpoint
        return saved.program if saved is not None else None

    @property
    def checkpoint_epoch(self) -> int | None:
        """The last completed epoch (0-based), or None when none has completed."""
        saved = self.saved_checkpoint
        return saved.epoch if saved is not None else None

    @property
    def checkpoint_position(self) -> dict | None:
        """Where a pause stopped fit inside an epoch (the engine's ``PausePoint``), or None."""
        saved = self.saved_checkpoint
        return saved.position if saved is not None else None

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def can_resume(self) -> bool:
        if self.source == self.CODE:  # its program's state lives in the code that ran it
            return False
        if self.status in (self.STOPPED, self.PAUSED):  # from its checkpoint, or the start
            return True
        return self.status in (self.FAILED, self.CANCELLED) and self.checkpoint_json is not None

    @property
    def can_pause(self) -> bool:
        """Queued, or running with training still to do (an epoch under way or to come)."""
        if self.status not in self.ACTIVE or self.cancel_requested or self.pause_requested:
            return False
        if self.source == self.CODE:  # no checkpoint here to go on from
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
