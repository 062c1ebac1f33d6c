"""Pulsar's WebSocket API on the gateway's HTTP port (``/ws/v2/...``, ``/ws/v3/consumer``).

Modules: :mod:`~pulsar_gateway.adapters.websocket.params` (query parameters) and
:mod:`~pulsar_gateway.adapters.websocket.frames` (JSON frames) and
:mod:`~pulsar_gateway.adapters.websocket.routing` (partition choice) are sans-I/O;
:mod:`~pulsar_gateway.adapters.websocket.producer` and
:mod:`~pulsar_gateway.adapters.websocket.consumer` bind sessions to the core;
:mod:`~pulsar_gateway.adapters.websocket.routes` registers the paths.
"""
