"""What runs a program over data: ``fit`` / ``evaluate`` / ``predict`` and their parts.

``trainer.py`` (the :class:`Trainer` mixed into :class:`training.engine.Program`, its public
``train_step`` override point), ``scoring.py`` (rewards, metrics, ``evaluate``, the
optimizer's candidate scorer), ``predicting.py`` (batched, bounded predictions),
``epoch_iterator.py`` and ``data_adapter.py`` (how ``x`` / ``y`` are batched and checked),
``history.py`` (what ``fit`` returns) and ``output_bounds.py`` (the answer length a training
set allows). Import from the modules themselves; this package's face imports nothing, so a
part of the engine can use one module without loading the others.
"""
