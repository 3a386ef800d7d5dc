"""What a run produces while it trains: epoch logs, candidates, optimizer errors,
evaluations with each example's prediction, and LM call traces.

The run page is rendered from these rows alone, which is why a page opened mid-run shows
everything so far.
"""

from __future__ import annotations

from django.db import models
from django.urls import reverse

from training.models.runs import Run


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
