"""The front ends: each translates one wire protocol into calls on the core's public API."""
