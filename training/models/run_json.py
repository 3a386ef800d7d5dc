"""The shapes of a run's JSON, in one place, and how an older shape becomes the current one.

``Run.json_version`` says which shape a run's JSON is in; every run in the database is at
:data:`VERSION` (a data migration upgrades the older ones with the functions below), so the
code reads each field as documented here and keeps no fallback for an older shape. A change
of shape adds a version: its number here, the upgrade of one version to the next below, and
a data migration that applies it (``makemigrations`` asks for one: the column's default is
:data:`VERSION`). The migrations call these functions as they are now, so each step leaves a
value already in its shape as it is (a later migration may pass it again).

The current shapes (version 3):

``Run.config`` (``training.execution.run_config.validate_run_config``; a run from code:
``training.runs.from_code``): ``model``; ``reward``, ``metrics``; ``epochs``,
``batch_size``, ``validation_split``, ``selection_split`` (a fraction, 0.0: none),
``shuffle``, ``seed``; ``evaluations_before``, ``evaluations_after``; ``optimizer`` and its
parameters; caps (``training.execution.budget``); ``training_order``
(``run_config.TRAINING_ORDER``: ``"spread_by_label"`` or ``run_config.FILE_ORDER``);
``kept_seed`` once a run from code has ended.

``Run.forecast`` (``training.execution.forecast``): the forecast made at launch, or None.

``Run.usage`` (``training.engine.language_models.usage.Usage.to_dict`` summed over the
attempts, ``training.execution.usage.merged_usage``), with ``failed_predictions``.

``Run.selection`` ({variable: the optimizer's last ``selection`` event}), ``final_selection``
({variable: its ``final_selection`` event}), ``refusals`` (``training.execution.refusals``):
as ``Run`` documents them beside each field.

``Run.epoch_so_far``: {"epoch", "batches", "points": [[batches done, running reward]]}
while an epoch is under way, else None (``recording.persistence``).

``Run.samples``: [{"inputs", "expected", "predicted"}]; ``Run.trained_program_json``: the
trained program (``Program.get_config()``), or None.

``RunCheckpoint.program``: ``Program.get_config()``; a checkpoint with an optimizer holds its
state in ``compile.optimizer.state``, with ``errors_reported`` (the optimizer errors the run
keeps of the attempts before). ``RunCheckpoint.position``: the engine's ``PausePoint``, or
None.

Example:

    config = upgrade_config(1, stored_config)  # the shape version 2 reads
"""

from __future__ import annotations

from typing import Any

#: The shape every run's JSON is in (``Run.json_version``).
VERSION = 3
#: The ``training_order`` of rows fit saw in the order they were stored (a run from code; a
#: run stored before launch wrote the order).
FILE_ORDER = "file_order"


def upgrade_config(version: int, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` of a run at ``version``, in the current shape.

    Version 2: ``selection_split`` is always there (0.0 for a run stored before fit had a
    selection split). Version 3: ``training_order`` is always there (:data:`FILE_ORDER` for a
    run stored before launch wrote it: its fit saw the rows in file order)."""
    config = dict(config or {})
    if version < 2 and config.get("selection_split") is None:
        config["selection_split"] = 0.0
    if version < 3 and not config.get("training_order"):
        config["training_order"] = FILE_ORDER
    return config


def upgrade_checkpoint(
    version: int, program: dict[str, Any] | None, errors_kept: int
) -> dict[str, Any] | None:
    """A checkpoint's ``program`` of a run at ``version``, in the current shape.

    Version 2: an optimizer's saved state counts its errors (``errors_reported``); a state
    saved before it counted them gets ``errors_kept``, the optimizer errors the run keeps
    when it resumes from that checkpoint (those of the epochs up to it)."""
    if version >= 2 or not isinstance(program, dict):
        return program
    state = ((program.get("compile") or {}).get("optimizer") or {}).get("state")
    if not isinstance(state, dict) or not state or "errors_reported" in state:
        return program
    state["errors_reported"] = errors_kept
    return program
