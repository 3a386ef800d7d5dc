"""The base of every WebSocket consumer: it refuses anonymous users.

Reuse ``LoginRequiredJsonConsumer`` for every app consumer: it closes the socket (code
4401) before accepting when the scope's user is anonymous, then calls
``on_authenticated()``, where a subclass checks ownership, joins its groups and accepts.
Groups joined through ``self.join(group)`` are left automatically on disconnect.
"""

from channels.generic.websocket import AsyncJsonWebsocketConsumer

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class LoginRequiredJsonConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        self.joined_groups: list[str] = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        await self.on_authenticated()

    async def on_authenticated(self):
        """Override to check access and join groups; call ``await self.accept()``."""
        await self.accept()

    async def join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined_groups.append(group)

    async def disconnect(self, code):
        for group in getattr(self, "joined_groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)


class NoRouteConsumer(AsyncJsonWebsocketConsumer):
    """The last WebSocket route: a path nothing else matches (``/ws/runs/abc/``) is refused
    at the handshake (403) instead of raising "No route found" (a 500)."""

    async def connect(self):
        await self.close()
