"""Benchmarks: ``python -m benchmarks.<name> --help``."""
