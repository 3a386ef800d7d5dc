"""The run page's WebSocket: fragments of one run, for its owner only.

It sends plain HTML text (what the htmx WebSocket extension swaps in by id), not JSON. On
connect it sends a snapshot of every fragment rendered from the database, so whatever
happened between the page render and the socket opening is not lost; it sends one again when
the channel layer comes back from an outage (the socket stays open through it:
:mod:`core.layer_outages`). If Redis is out when the page connects, the handshake is refused
with 1013 (try again later), which the htmx WebSocket extension retries.

A page drawn after its run had finished says so (``?drawn=finished``): its per-example table
is already final, and it is the one part a reader filters, sorts and pages, so the snapshots
leave it out instead of resetting the reader's view to the unfiltered first page.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from core.consumers import LoginRequiredJsonConsumer
from core.layer_outages import LAYER_ERRORS, SurvivesLayerOutages
from training.insight import live
from training.insight.sections import registry
from training.models import Run

CLOSE_NOT_FOUND = 4404
CLOSE_TRY_AGAIN_LATER = 1013
#: The sections a page drawn after its run finished already holds in their final state.
FINAL_WHEN_DRAWN_FINISHED = ("examples", "candidate_confidence")

logger = logging.getLogger(__name__)


class RunConsumer(SurvivesLayerOutages, LoginRequiredJsonConsumer):
    async def on_authenticated(self):
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        run = await database_sync_to_async(self._owned_run)(run_id)
        if run is None:  # someone else's run or no such run: same answer, like a 404
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.run_id = run.pk
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.drawn_finished = query.get("drawn") == ["finished"]
        try:
            await self.join(run.group_name)
        except LAYER_ERRORS as exc:
            logger.warning("run %s socket refused, channel layer unreachable: %s", run.pk, exc)
            await self.close(code=CLOSE_TRY_AGAIN_LATER)
            return
        await self.accept()
        await self.send_snapshot()

    async def send_snapshot(self):
        """Every fragment as the database has it now (read afresh: this also runs later)."""
        snapshot = await database_sync_to_async(self._render_snapshot)()
        if snapshot is None:  # the run was deleted meanwhile
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.send(text_data=snapshot)

    def _render_snapshot(self) -> str | None:
        run = self._owned_run(self.run_id)
        if run is None:
            return None
        if self.drawn_finished and not run.is_active:
            return live.render_parts(
                run, [p for p in registry.names() if p not in FINAL_WHEN_DRAWN_FINISHED]
            )
        return live.render_parts(run)

    async def on_layer_recovered(self):
        await self.send_snapshot()

    def _owned_run(self, run_id: int) -> Run | None:
        return Run.objects.select_related("program").filter(pk=run_id, owner=self.user).first()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """The page never needs to talk back; ignore what the ws extension may send."""

    async def run_html(self, event):
        await self.send(text_data=event["html"])
