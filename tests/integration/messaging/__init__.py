"""The binary protocol with the official client: producing, consuming, subscription types,
acks, readers and seek, schemas."""
