"""Liveness: how the dashboard knows a run's worker is alive, and what it does when it is not.

A running attempt proves it lives twice: a heartbeat in the database (``heartbeat``) and a
pulse in Redis (``pulse``). The reaper fails a run whose both went silent and resumes it
within the run's allowance (``reaper``); a queued run whose broker message was lost is sent
again (``forgotten_runs``); stopping Trainboard pauses running runs and the next start
resumes them (``shutdown``).
"""
