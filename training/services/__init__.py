"""Domain logic of the training app; views, tasks and consumers stay thin on top of it."""
