"""Benchmarks, run with ``python -m contextledger.bench NAME [--json]``."""
