"""The cluster the fleet forms, and where its clients reach this gateway.

Every gateway serves every topic, so Pulsar's ``ClusterData`` (``serviceUrl``,
``brokerServiceUrl``) and a lookup's ``LookupData`` both name this gateway's advertised
address (``--advertised-address``; the load balancer's, in a fleet) and its ports, known
once the servers are bound (port 0 asks for an ephemeral one).

Advertised listeners (Pulsar's ``advertisedListeners``, ``name:url`` entries) give clients in
other networks their own URLs for the same gateway: a lookup that names a listener
(``CommandLookupTopic.advertised_listener_name``, the clients' ``listenerName``) is
answered with that listener's URLs, and one that names a listener the gateway does not
have is refused as Pulsar refuses it (``ServiceNotReady``, "the broker do not have X
listener"; the clients retry it until their operation timeout).

Pulsar tells tools that read storage directly where it is (``GET /admin/v2/brokers/
internal-configuration``, ``InternalConfigurationData``; superuser only): here that is the
Redis the fleet keeps its state in and the key prefix, which the Spark data source's
executors read (docs/architecture.md "Design decisions": Spark reads Redis directly from its
executors).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["AdvertisedListener", "Cluster", "UnknownListener", "parse_advertised_listeners"]

#: The URL schemes a listener may name, each at most once.
_LISTENER_SCHEMES = ("pulsar", "pulsar+ssl", "http", "https")


@dataclass(frozen=True, slots=True)
class AdvertisedListener:
    """One advertised listener's URLs (None where it names none)."""

    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    web_service_url: str | None = None
    web_service_url_tls: str | None = None

    @property
    def broker_url(self) -> str:
        """What a lookup answers as ``brokerServiceUrl``: the ``pulsar://`` URL, else the
        ``pulsar+ssl://`` one (a listener names one of them)."""
        url = self.broker_service_url or self.broker_service_url_tls
        assert url is not None  # parse_advertised_listeners refuses a listener without
        return url


class UnknownListener(LookupError):
    """A lookup names a listener this gateway does not have; the message is Pulsar's
    (``NamespaceService``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the broker do not have {name} listener")


def parse_advertised_listeners(text: str) -> dict[str, AdvertisedListener]:
    """Pulsar's ``advertisedListeners``: comma-separated ``<name>:<url>`` entries, each
    listener with at most one URL per scheme (``pulsar``, ``pulsar+ssl``, ``http``,
    ``https``) and a ``pulsar`` or ``pulsar+ssl`` one; no host and port named by two
    listeners (``MultipleListenerValidator``).

    Raises:
        ValueError: an entry that breaks these rules, named in the message.
    """
    urls: dict[str, dict[str, str]] = {}
    owners: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, url = entry.partition(":")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise ValueError(f"{entry!r} is not <listener name>:<URL>")
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _LISTENER_SCHEMES or not parts.hostname or parts.port is None:
            raise ValueError(
                f"{url!r} of listener {name!r} is not a pulsar://, pulsar+ssl://, http:// or "
                "https:// URL with a host and a port"
            )
        by_scheme = urls.setdefault(name, {})
        if scheme in by_scheme:
            raise ValueError(f"listener {name!r} names two {scheme}:// URLs")
        by_scheme[scheme] = url
        host_port = f"{parts.hostname}:{parts.port}"
        owner = owners.setdefault(host_port, name)
        if owner != name:
            raise ValueError(f"{host_port} is named by listeners {owner!r} and {name!r}")
    listeners = {}
    for name, by_scheme in urls.items():
        if "pulsar" not in by_scheme and "pulsar+ssl" not in by_scheme:
            raise ValueError(f"listener {name!r} names no pulsar:// or pulsar+ssl:// URL")
        listeners[name] = AdvertisedListener(
            by_scheme.get("pulsar"),
            by_scheme.get("pulsar+ssl"),
            by_scheme.get("http"),
            by_scheme.get("https"),
        )
    return listeners


class Cluster:
    """The cluster's name and this gateway's advertised URLs."""

    def __init__(
        self,
        name: str,
        advertised_host: str,
        storage_url: str = "",
        key_prefix: str = "pgw",
        listeners: dict[str, AdvertisedListener] | None = None,
    ) -> None:
        self.name = name
        self.advertised_host = advertised_host
        #: the advertised listeners by name (``advertisedListeners``)
        self.listeners = listeners or {}
        self.storage_url = storage_url
        self.key_prefix = key_prefix
        self.broker_port = 6650
        self.http_port = 8080
        self.broker_port_tls: int | None = None
        self.http_port_tls: int | None = None
        #: whether the ports are known (:meth:`advertise`): until then the URLs name defaults
        self.advertised = False

    def listener(self, name: str) -> AdvertisedListener:
        """The advertised listener ``name``.

        Raises:
            UnknownListener: this gateway has no such listener.
        """
        listener = self.listeners.get(name)
        if listener is None:
            raise UnknownListener(name)
        return listener

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
        self.advertised = True

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

    @property
    def broker_id(self) -> str:
        """``host:httpPort``: Pulsar's broker id (``PulsarService.getBrokerId``), what the
        admin API lists as an active broker."""
        return f"{self.advertised_host}:{self.http_port}"

    def internal_configuration(self) -> dict[str, str]:
        """Pulsar's ``InternalConfigurationData``: the metadata store and the ledgers' home
        are this fleet's Redis (``metadataStoreUrl``) and key prefix (``ledgersRootPath``)."""
        return {
            "metadataStoreUrl": self.storage_url,
            "configurationMetadataStoreUrl": self.storage_url,
            "bookkeeperMetadataServiceUri": self.storage_url,
            "ledgersRootPath": self.key_prefix,
        }
