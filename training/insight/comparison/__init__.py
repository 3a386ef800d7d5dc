"""Comparison: what the compare page shows of several runs side by side.

Their figures (chart series, a metrics table, before/after rows, the config diff:
``figures``) and what each run learned, its best candidate per variable (``learned``).
"""
