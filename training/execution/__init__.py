"""Execution: what a worker does with a run. The Celery tasks, the phases of an attempt, the
run configuration read into engine objects, budget caps, state transitions, model loading,
usage, the forecast trial; in sub-packages, what an attempt stores (``recording``: engine
events, evaluations, predictions, traces), how its worker is known to live (``liveness``:
heartbeat, pulse, reaper) and how fast a model runs on the workers (``pace``).

The worker records and emits (``events``), it never renders: imports only ``programs``.
"""
