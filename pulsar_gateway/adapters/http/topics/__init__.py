"""Admin REST v2 routes of topics (Pulsar's ``admin/v2`` ``PersistentTopics`` and
``NonPersistentTopics``): lifecycle and partitions, stats, subscriptions and cursors,
scheduled messages, compaction and the other per-topic operations."""
