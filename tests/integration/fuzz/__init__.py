"""Fuzzing campaigns and hostile input: marker ``fuzz``."""
