"""HTTP views of the training app (thin: reads live in training.selectors, writes and logic
in training.services)."""
