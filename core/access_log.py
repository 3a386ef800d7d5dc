"""daphne's access log through Python logging, so each request line has a time and a level
like every other line of the web log (daphne writes its NCSA lines straight to stdout).

``install()`` is called by project.asgi, which daphne imports before it builds its access
log writer.
"""

from __future__ import annotations

import logging

from daphne import access

logger = logging.getLogger("daphne.access")


def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
    logger.info('%s "%s" %s %s', host, request, status or "-", length or "-")


def install() -> None:
    access.AccessLogGenerator.write_entry = write_entry
