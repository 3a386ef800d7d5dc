"""``make run``'s log files kept to a size: copy, then truncate (logrotate's copytruncate).

Why copy-then-truncate: each child writes its stdout to ``var/log/NAME.log``, opened once with
``O_APPEND`` when it started. Renaming the file would leave the child writing to the renamed
one; truncating it in place makes the child's next write land at the new end (O_APPEND seeks
there on every write). Lines written between the copy and the truncation are lost: at most a
few, once per ``max_bytes``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: Defaults of TRAINBOARD_LOG_MAX_BYTES and TRAINBOARD_LOG_BACKUPS.
MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5


def rotate(path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> bool:
    """When ``path`` is larger than ``max_bytes``: NAME.log.1 … NAME.log.{backups} shift up one
    (the oldest is dropped), NAME.log is copied to NAME.log.1 and emptied. Whether it rotated."""
    path = Path(path)
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    if backups < 1:
        os.truncate(path, 0)
        return True
    for number in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{number}")
        if older.exists():
            os.replace(older, path.with_name(f"{path.name}.{number + 1}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    os.truncate(path, 0)
    return True
