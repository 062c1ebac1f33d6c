"""Pulsar's WebSocket API on the gateway's HTTP port (``/ws/v2/...``, ``/ws/v3/consumer``).

Modules: :mod:`~adapters.websocket.params` (query parameters) and
:mod:`~adapters.websocket.frames` (JSON frames) and :mod:`~adapters.websocket.routing`
(partition choice) are sans-I/O; :mod:`~adapters.websocket.producer` and
:mod:`~adapters.websocket.consumer` bind sessions to the core;
:mod:`~adapters.websocket.routes` registers the paths.
"""
