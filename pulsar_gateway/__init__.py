"""pulsar-redis-gateway: a Pulsar-compatible messaging gateway whose state lives in Redis.

Layers, each importing only the ones below it:

* :mod:`pulsar_gateway.server`: the composition root and the ``pulsar-gateway`` command;
* :mod:`pulsar_gateway.adapters`: the binary protocol, WebSocket and HTTP front ends;
* :mod:`pulsar_gateway.core`: topics, producers, subscriptions, dispatch, policies and the
  Redis storage model, with no knowledge of any wire format;
* :mod:`pulsar_gateway.proto`: the generated Pulsar wire-format classes (adapters only).
"""

from pulsar_gateway._build import build_info

__all__ = ["build_info"]
