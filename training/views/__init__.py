"""HTTP views of the training app (thin: logic lives in training.services)."""
