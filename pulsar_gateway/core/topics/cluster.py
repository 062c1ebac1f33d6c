"""The cluster the fleet forms, and where its clients reach this gateway.

Every gateway serves every topic, so Pulsar's ``ClusterData`` (``serviceUrl``,
``brokerServiceUrl``) and a lookup's ``LookupData`` both name this gateway's advertised
address (``--advertised-address``; the load balancer's, in a fleet) and its ports, known
once the servers are bound (port 0 asks for an ephemeral one).

Pulsar tells tools that read storage directly where it is (``GET /admin/v2/brokers/
internal-configuration``, ``InternalConfigurationData``; superuser only): here that is the
Redis the fleet keeps its state in and the key prefix, which the Spark data source's
executors read (DESIGN.md "Spark reads Redis directly from its executors").
"""

from __future__ import annotations

__all__ = ["Cluster"]


class Cluster:
    """The cluster's name and this gateway's advertised URLs."""

    def __init__(
        self, name: str, advertised_host: str, storage_url: str = "", key_prefix: str = "pgw"
    ) -> None:
        self.name = name
        self.advertised_host = advertised_host
        self.storage_url = storage_url
        self.key_prefix = key_prefix
        self.broker_port = 6650
        self.http_port = 8080
        self.broker_port_tls: int | None = None
        self.http_port_tls: int | None = None

    def advertise(
        self,
        broker_port: int,
        http_port: int,
        broker_port_tls: int | None = None,
        http_port_tls: int | None = None,
    ) -> None:
        """Record the ports this gateway listens on (the TLS ones None without TLS)."""
        self.broker_port, self.http_port = broker_port, http_port
        self.broker_port_tls, self.http_port_tls = broker_port_tls, http_port_tls

    @property
    def broker_service_url(self) -> str:
        """``pulsar://host:port``: ClusterData ``brokerServiceUrl``, LookupData ``brokerUrl``."""
        return f"pulsar://{self.advertised_host}:{self.broker_port}"

    @property
    def service_url(self) -> str:
        """``http://host:port``: ClusterData ``serviceUrl``, LookupData ``httpUrl``."""
        return f"http://{self.advertised_host}:{self.http_port}"

    @property
    def broker_service_url_tls(self) -> str | None:
        """``pulsar+ssl://host:port``: ClusterData ``brokerServiceUrlTls``, LookupData
        ``brokerUrlTls``; None without TLS."""
        if self.broker_port_tls is None:
            return None
        return f"pulsar+ssl://{self.advertised_host}:{self.broker_port_tls}"

    @property
    def service_url_tls(self) -> str | None:
        """``https://host:port``: ClusterData ``serviceUrlTls``, LookupData ``httpUrlTls``;
        None without TLS."""
        if self.http_port_tls is None:
            return None
        return f"https://{self.advertised_host}:{self.http_port_tls}"

    def internal_configuration(self) -> dict[str, str]:
        """Pulsar's ``InternalConfigurationData``: the metadata store and the ledgers' home
        are this fleet's Redis (``metadataStoreUrl``) and key prefix (``ledgersRootPath``)."""
        return {
            "metadataStoreUrl": self.storage_url,
            "configurationMetadataStoreUrl": self.storage_url,
            "bookkeeperMetadataServiceUri": self.storage_url,
            "ledgersRootPath": self.key_prefix,
        }
