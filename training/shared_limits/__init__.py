"""Shared limits: the providers' rate limits held in Redis for every worker on every machine.

The engine calls an interface (``training.engine.language_models.limits.rate_limits``) and
keeps a per-process semaphore; what holds the limits across processes is the product's, here
(``redis_limiter``), apart from the engine: the engine imports none of it (``.importlinter``).
The dashboard installs it in every process (``training.execution.provider_limits``, from
``TrainingConfig.ready``). Import from the module itself; this package's face imports nothing.
"""
