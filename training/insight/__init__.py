"""Insight: what a user sees of runs. The run page, its sections (``sections``) and their live
fragments (rendered after what ``execution.events`` says happened), summaries, spend, timing, lineage, the population
map, comparison, plots, the evaluation table and trace reads, the run page's WebSocket.

The top room of the training app: it reads all the others, none of them imports it.
"""
