"""The Spark data source against real gateways (a JVM): marker ``spark``."""
