"""The engine's models behind litellm: :class:`LanguageModel`, :class:`EmbeddingModel` and
what every call shares.

``errors.py`` (the error types and which are retried), ``retry.py`` (bounded attempts with
backoff), ``limits/`` (the per-model semaphore, the providers' shared rate limits), ``endpoints/``
(a custom endpoint's key and address guard), ``litellm_loader.py`` (the one litellm import),
``offline.py`` (the hook the offline ``local`` provider is reached through), ``output_format.py`` /
``parsing.py`` (the answer's schema note and its checked parse), ``cache.py`` (response caches),
``usage.py`` (counted calls, tokens and cost), ``tracing.py`` (per-call traces) and
``redaction.py`` (secrets kept out of both). Import from the modules themselves; this package's
face imports nothing, so the local provider can use ``limits.concurrency`` without loading the
language model.
"""
