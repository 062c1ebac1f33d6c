"""Topics, partitioned topics, tenants and namespaces, the cluster, schemas."""

from __future__ import annotations

from pulsar_gateway.core.topics.cluster import Cluster
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.schema_registry import SchemaRegistry
from pulsar_gateway.core.topics.tenants import Tenants
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = ["Cluster", "PartitionedTopics", "SchemaRegistry", "Tenants", "Topic", "Topics"]
