"""The composition root and the ``pulsar-gateway`` command: the one place that knows every part."""
