"""Pace: how fast a model runs where the workers run it, the figures the forecast reads.

What each run a worker ends observed per call (``learning``, kept and read by ``measured``);
what the other processes on the machine take of its CPUs (``cpu_meter``); and the queue a run
would join now (``machine``).
"""
