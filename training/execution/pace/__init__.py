"""Pace: how fast a model runs where the workers run it, the figures the forecast reads.

A model's seconds per token, measured by a worker (``calibration``) and refined by every run
it ends (``learning``); what the other processes on the machine take of its CPUs
(``cpu_meter``); and the machine a run would start on now: the runs ahead of it, the worker
processes free, the contention expected (``machine``).
"""
