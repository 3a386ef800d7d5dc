"""Runs: what a user asks of a program. Launch, cancel, resume, manage (archive, tag,
delete), branch, and the tree of runs that branches make; the launch forms.

Imports ``programs`` and ``execution`` (a launch sends the attempt to a worker), never
``insight``.
"""
