"""Example rows: what the run page's per-example table (``insight.eval_table``) adds to its
rows beyond the stored predictions.

People's corrections of a row (``eval_corrections``), which predictions people's marks
scored (``human_judgements``), and the validation examples with the seed's and the best
candidate's predictions on them (``validation_rows``).
"""
