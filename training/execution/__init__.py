"""Execution: what a worker does with a run. The Celery tasks, the phases of an attempt, the
run configuration read into engine objects, budget caps, state transitions, persistence of
engine events, heartbeat and reaper, model loading, usage, the forecast trial.

The worker records and emits (``events``), it never renders: imports only ``programs``.
"""
