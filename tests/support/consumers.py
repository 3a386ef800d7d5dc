"""A small echo consumer for the plumbing tests: worker → channel layer → socket, and back."""

from core.consumers import LoginRequiredJsonConsumer


def echo_group(user_id: int, name: str) -> str:
    """Group name for a user's echo channel (groups are per user: nobody hears others)."""
    return f"echo.u{user_id}.{name}"


class EchoConsumer(LoginRequiredJsonConsumer):
    """ws/echo/<name>/: relays group messages of type "echo.message" to the client and
    echoes what the client sends."""

    async def on_authenticated(self):
        name = self.scope["url_route"]["kwargs"]["name"]
        await self.join(echo_group(self.user.pk, name))
        await self.accept()

    async def receive_json(self, content, **kwargs):
        await self.send_json({"echo": content})

    async def echo_message(self, event):
        await self.send_json(event["payload"])


async def open_echo_socket(user_id: int):
    """A connected test client on a new echo channel of user ``user_id``; returns it and the
    channel's group name."""
    import uuid
    from types import SimpleNamespace

    from channels.testing import WebsocketCommunicator

    name = uuid.uuid4().hex[:12]
    communicator = WebsocketCommunicator(EchoConsumer.as_asgi(), f"/ws/echo/{name}/")
    communicator.scope["user"] = SimpleNamespace(is_authenticated=True, pk=user_id)
    communicator.scope["url_route"] = {"kwargs": {"name": name}}
    connected, _ = await communicator.connect(timeout=10)
    assert connected, "the echo consumer refused the connection"
    return communicator, echo_group(user_id, name)
