"""Keep a WebSocket open through a channel-layer (Redis) outage, and resync when it ends.

Why: a consumer's channel-layer receive raises when Redis stops, stalls or restarts, and
left alone that ends the consumer with a traceback and closes the socket; the page then
depends on the browser's reconnect timing, and a receive stuck on a stalled Redis stays
silent after Redis comes back. With :class:`SurvivesLayerOutages` the socket stays open: the
consumer logs one warning, retries with a capped backoff by re-joining its groups (which also
restores memberships lost with the outage), then dispatches a ``layer.recovered`` message so
the consumer can resend what the page may have missed while messages could not flow.
"""

from __future__ import annotations

import asyncio
import logging

import redis.exceptions

logger = logging.getLogger(__name__)

# What a channel layer on Redis raises when Redis is unreachable, stalled or restarting.
LAYER_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


class SurvivesLayerOutages:
    """Mixin for a ``LoginRequiredJsonConsumer``: a layer outage pauses the socket, never kills it.

    channels' ``AsyncConsumer.__call__`` assigns ``self.channel_receive`` and then reads from
    it for the consumer's lifetime; this mixin's property hands it a receive that survives
    layer errors instead. Put the mixin first in the bases.

    Args (class attributes):
        first_retry: seconds before the first attempt to re-join after an error.
        max_retry: cap of the doubling delay between attempts.

    Example:
        >>> class RunConsumer(SurvivesLayerOutages, LoginRequiredJsonConsumer):
        ...     async def on_layer_recovered(self):
        ...         await self.send(text_data=render_snapshot())
    """

    first_retry = 0.5
    max_retry = 5.0

    @property
    def channel_receive(self):
        return self._receive_through_outages

    @channel_receive.setter
    def channel_receive(self, receive):
        self._layer_receive = receive

    async def _receive_through_outages(self) -> dict:
        try:
            return await self._layer_receive()
        except LAYER_ERRORS as exc:
            logger.warning(
                "channel layer unreachable (%s: %s); keeping %s open and retrying",
                type(exc).__name__,
                exc,
                self.channel_name,
            )
        delay = self.first_retry
        while True:
            await asyncio.sleep(delay)
            try:
                await self.rejoin_groups()
            except LAYER_ERRORS:
                delay = min(delay * 2, self.max_retry)
                continue
            logger.info("channel layer back; %s resyncs", self.channel_name)
            return {"type": "layer.recovered"}

    async def rejoin_groups(self) -> None:
        """Add this channel to its groups again (idempotent); raises while Redis is out."""
        for group in self.joined_groups:
            await self.channel_layer.group_add(group, self.channel_name)

    async def layer_recovered(self, message: dict) -> None:
        await self.on_layer_recovered()

    async def on_layer_recovered(self) -> None:
        """Override to resend state the page may have missed during the outage."""
