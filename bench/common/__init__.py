"""Shared helpers of the benchmark suite: rows, timing, memory, reports, plots.

Every workload script (ours in ``bench/suite``, the others' in ``bench/<area>``)
imports from here so that figures are measured and reported one way.
"""
