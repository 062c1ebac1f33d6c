"""Redis itself: the Lua scripts, ledgers, the notifier, Redis 6.2, replica acks, Redis Cluster."""
