"""Benchmarks: `python -m benchmarks` (or `make bench`). Ratios against a baseline measured in the same run."""
