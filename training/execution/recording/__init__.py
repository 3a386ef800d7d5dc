"""Recording: what an attempt stores while it runs, so the pages can be rendered from rows.

The engine's events, evaluations and final results (``persistence``), each test example's
prediction of an evaluation (``evaluation_examples``), each scored candidate's per-example
predictions, bounded per run (``candidate_predictions``), and the LM call traces
(``traces``).
"""
