"""The compose/ files and the stack built and run on a Docker engine: marker ``docker``."""
