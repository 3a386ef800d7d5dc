"""Programs: what a user trains. Building and checking programs, their versions and
settings, the language models and endpoints they call, the diff of two candidates.

The bottom room of the training app: it imports none of ``runs``, ``execution``, ``insight``.
"""
