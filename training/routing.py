"""WebSocket routes of the training app."""

from django.urls import path

from training.insight.consumers import RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
