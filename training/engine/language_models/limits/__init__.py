"""Limits: how many requests to one provider endpoint may run at once, and how fast.

The per-model concurrency limit of one process (``concurrency``), the provider's rate limits
shared by every process, as an interface the engine calls (``rate_limits``), and that
interface held in Redis for every worker on every machine (``redis_limiter``). Import from
the modules themselves; this package's face imports nothing.
"""
