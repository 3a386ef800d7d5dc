"""The run page's WebSocket: fragments of one run, for its owner only.

It sends plain HTML text (what the htmx WebSocket extension swaps in by id), not JSON. On
connect it sends a snapshot of every fragment rendered from the database, so whatever
happened between the page render and the socket opening is not lost.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from core.consumers import LoginRequiredJsonConsumer
from training.models import Run
from training.services import live

CLOSE_NOT_FOUND = 4404


class RunConsumer(LoginRequiredJsonConsumer):
    async def on_authenticated(self):
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        run = await database_sync_to_async(self._owned_run)(run_id)
        if run is None:  # someone else's run or no such run: same answer, like a 404
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.join(run.group_name)
        await self.accept()
        snapshot = await database_sync_to_async(live.render_parts)(run)
        await self.send(text_data=snapshot)

    def _owned_run(self, run_id: int) -> Run | None:
        return Run.objects.select_related("program").filter(pk=run_id, owner=self.user).first()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """The page never needs to talk back; ignore what the ws extension may send."""

    async def run_html(self, event):
        await self.send(text_data=event["html"])
