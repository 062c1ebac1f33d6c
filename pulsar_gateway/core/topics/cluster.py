"""The cluster the fleet forms, and where its clients reach this gateway.

Every gateway serves every topic, so Pulsar's ``ClusterData`` (``serviceUrl``,
``brokerServiceUrl``) and a lookup's ``LookupData`` both name this gateway's advertised
address (``--advertised-address``; the load balancer's, in a fleet) and its ports, known
once the servers are bound (port 0 asks for an ephemeral one).
"""

from __future__ import annotations

__all__ = ["Cluster"]


class Cluster:
    """The cluster's name and this gateway's advertised URLs."""

    def __init__(self, name: str, advertised_host: str) -> None:
        self.name = name
        self.advertised_host = advertised_host
        self.broker_port = 6650
        self.http_port = 8080

    def advertise(self, broker_port: int, http_port: int) -> None:
        """Record the ports this gateway listens on."""
        self.broker_port, self.http_port = broker_port, http_port

    @property
    def broker_service_url(self) -> str:
        """``pulsar://host:port``: ClusterData ``brokerServiceUrl``, LookupData ``brokerUrl``."""
        return f"pulsar://{self.advertised_host}:{self.broker_port}"

    @property
    def service_url(self) -> str:
        """``http://host:port``: ClusterData ``serviceUrl``, LookupData ``httpUrl``."""
        return f"http://{self.advertised_host}:{self.http_port}"
