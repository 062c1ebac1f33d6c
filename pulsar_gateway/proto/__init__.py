"""``PulsarApi.proto`` and its generated modules (regenerate with ``python -m
pulsar_gateway.proto.regen``)."""
