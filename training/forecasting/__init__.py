"""Forecasting: what a run will cost before it starts, for the dashboard's launch form.

Pure Python on top of the engine (it reads the optimizers' cards and ``fit``'s rules), apart
from it: the engine is the guide's API and imports none of this (``.importlinter``). The calls
a run makes (``forecast``), their tokens and seconds at a model's measured pace (``pace``) and
how much slower a local model's calls run when other processes share the cores
(``contention``). The worker measures the paces (``training.execution.pace``) and stores the
forecast (``training.execution.forecast``). Import from the modules themselves; this package's
face imports nothing.
"""
