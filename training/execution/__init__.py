"""Execution: what a worker does with a run. The Celery tasks, the phases of an attempt, the
run configuration read into engine objects, budget caps, state transitions, model loading,
usage, the forecast; in sub-packages, what an attempt stores (``recording``: engine events,
evaluations, predictions, traces), how its worker is known to live (``liveness``: heartbeat,
pulse, reaper) and what finished runs observed of their model, which the forecast reads
(``pace``).

The worker records and emits (``events``), it never renders: imports only ``programs``.
"""
