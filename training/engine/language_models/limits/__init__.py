"""Limits: how many requests to one provider endpoint may run at once, and how fast.

The per-model concurrency limit of one process (``concurrency``) and the provider's rate
limits shared by every process, as an interface the engine calls (``rate_limits``): whoever
runs the engine installs what holds them (the dashboard: a limiter in Redis for every worker
on every machine, ``training.shared_limits``, outside the engine). Import from the modules
themselves; this package's face imports nothing.
"""
