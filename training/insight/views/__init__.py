"""Pages that show runs: the run page and its fragments, candidates, traces, the evaluation
table, the population map, comparison, downloads, corrections."""
