"""Pulsar topic names: parsing, validation and the short-name rules.

Strategy: follow Pulsar's ``TopicName`` parser (``pulsar-common`` ``TopicName``) so that a
name means the same thing here as on a broker:

* ``my-topic`` is short for ``persistent://public/default/my-topic``;
* ``tenant/ns/topic`` is short for ``persistent://tenant/ns/topic``;
* ``domain://tenant/ns/topic`` is the full (v2) form; ``domain`` is ``persistent`` or
  ``non-persistent``;
* ``domain://tenant/cluster/ns/topic`` is the legacy (v1) form, kept because Pulsar keeps it;
  the local name of a legacy name may itself contain ``/``;
* tenant, cluster and namespace names match ``[-=:.\\w]+`` (Pulsar ``NamedEntity.checkName``);
* a partition of a partitioned topic is the topic ``<name>-partition-<i>``.

Anything else raises :class:`InvalidTopicName`, which adapters turn into Pulsar's
``InvalidTopicName`` error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pulsar_gateway.core.errors import InvalidTopicName

__all__ = ["PARTITION_SUFFIX", "TopicName", "parse_topic_name"]

PARTITION_SUFFIX = "-partition-"
_DOMAINS = ("persistent", "non-persistent")
# fullmatch, and ASCII \w as in Java: "$" would accept a trailing newline, and Python's
# default \w accepts any Unicode letter where Pulsar's Pattern does not.
_NAMED_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)
_PARTITION_RE = re.compile(r"(?P<base>.+)-partition-(?P<index>[0-9]+)", re.DOTALL)


_INT32_MAX = 2**31 - 1


def _partition_match(local_name: str) -> re.Match[str] | None:
    """Match ``<base>-partition-<i>`` the way Pulsar's ``TopicName.getPartitionIndex`` reads
    it: ``i`` is a canonical int32 (no leading zeros, no overflow), else not a partition."""
    match = _PARTITION_RE.fullmatch(local_name)
    if match is None:
        return None
    index = match.group("index")
    if index != str(int(index)) or int(index) > _INT32_MAX:
        return None
    return match


@dataclass(frozen=True, slots=True)
class TopicName:
    """A validated, fully qualified topic name."""

    domain: str
    tenant: str
    namespace_portion: str
    local_name: str
    cluster: str | None = None

    @property
    def namespace(self) -> str:
        """``tenant/ns`` (or ``tenant/cluster/ns`` for legacy names)."""
        if self.cluster is None:
            return f"{self.tenant}/{self.namespace_portion}"
        return f"{self.tenant}/{self.cluster}/{self.namespace_portion}"

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        """The partition index for ``...-partition-<i>`` names, else -1 (Pulsar's convention)."""
        match = _partition_match(self.local_name)
        return int(match.group("index")) if match else -1

    @property
    def partitioned_topic_name(self) -> TopicName:
        """The base topic of a partition; the topic itself when it is not a partition."""
        match = _partition_match(self.local_name)
        if not match:
            return self
        return TopicName(
            self.domain, self.tenant, self.namespace_portion, match.group("base"), self.cluster
        )

    def partition(self, index: int) -> TopicName:
        """The name of partition ``index`` of this topic."""
        return TopicName(
            self.domain,
            self.tenant,
            self.namespace_portion,
            f"{self.local_name}{PARTITION_SUFFIX}{index}",
            self.cluster,
        )

    def __str__(self) -> str:
        return f"{self.domain}://{self.namespace}/{self.local_name}"


#: Names up to this length are parsed once and cached (the last 65,536 of them); longer
#: ones, valid but rare, are parsed at each call. So the cache's size is bounded by this
#: length (about 90 MiB when full of 512-character names) and not by the names clients send
#: (65,536 names of 300 KB would take 40 GB: each name and its parsed local part).
_CACHED_NAME_MAX = 512


def parse_topic_name(name: str) -> TopicName:
    """Parse and validate a topic name, expanding short names.

    Args:
        name: a short (``t``, ``tenant/ns/t``) or full (``persistent://tenant/ns/t``) name.

    Returns:
        The validated :class:`TopicName`.

    Raises:
        InvalidTopicName: the name is empty, has an unknown domain, a bad tenant, cluster or
            namespace, or an empty local name.
    """
    if isinstance(name, str) and len(name) <= _CACHED_NAME_MAX:
        return _parse_cached(name)
    return _parse(name)


def _parse(name: str) -> TopicName:
    """:func:`parse_topic_name`, uncached."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicName("Invalid topic name: empty")
    if "\x00" in name:
        raise InvalidTopicName(f"Invalid topic name {name!r}: contains a NUL character")
    if "://" not in name:
        parts = name.split("/")
        if len(parts) == 1:
            name = f"persistent://public/default/{name}"
        elif len(parts) == 3:
            name = f"persistent://{name}"
        else:
            raise InvalidTopicName(
                f"Invalid short topic name {name!r}: it should be in the format of "
                "<tenant>/<namespace>/<topic> or <topic>"
            )
    domain, rest = name.split("://", 1)
    if domain not in _DOMAINS:
        raise InvalidTopicName(f"Invalid topic domain {domain!r} in {name!r}")
    parts = rest.split("/", 3)
    cluster: str | None = None
    if len(parts) == 3:
        tenant, namespace, local = parts
    elif len(parts) == 4:
        tenant, cluster, namespace, local = parts
    else:
        raise InvalidTopicName(f"Invalid topic name {name!r}")
    for what, value in (("tenant", tenant), ("namespace", namespace), ("cluster", cluster)):
        if value is not None and not _NAMED_ENTITY.fullmatch(value):
            raise InvalidTopicName(f"Invalid {what} name {value!r} in topic {name!r}")
    if not local:
        raise InvalidTopicName(f"Invalid topic name {name!r}: empty local name")
    return TopicName(domain, tenant, namespace, local, cluster)


#: :func:`_parse` of the names up to ``_CACHED_NAME_MAX`` characters
_parse_cached = lru_cache(maxsize=65536)(_parse)
