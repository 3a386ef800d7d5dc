"""Forecasting: what a run will cost before it starts, for the dashboard's launch form.

Pure Python on top of the engine (it reads the optimizers' cards and ``fit``'s rules), apart
from it: the engine is the guide's API and imports none of this (``.importlinter``). The calls
a run makes (``forecast``; the part its answers decide expected as its last runs went:
``decided``) and their tokens and seconds at what recent runs of the model
observed per call (``measured``). The worker keeps those observations
(``training.execution.pace``) and the launch stores the forecast
(``training.execution.forecast``). Import from the modules themselves; this package's
face imports nothing.
"""
