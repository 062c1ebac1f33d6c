"""pulsar-gateway, embedded Redis and the bench/ tools run as processes: marker ``process``."""
