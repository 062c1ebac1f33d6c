"""Admin REST v2 routes above single topics: clusters, tenants and namespaces (with their
policies, permissions and backlog quotas), schemas, brokers, unloads, and the operations
that do not apply over Redis (Pulsar's ``admin/v2`` ``Clusters``, ``Tenants``,
``Namespaces``, ``SchemasResource``, ``Brokers``, ``BrokerStats``, ``Bookies``, ...)."""
