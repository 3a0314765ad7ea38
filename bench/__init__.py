"""Benchmarks: a deterministic store generator (``bench.generate``) and the runner (``bench.run``)."""
