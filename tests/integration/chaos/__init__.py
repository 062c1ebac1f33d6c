"""Gateways and Redis killed, restarted, failing or failing over: marker ``chaos``."""
