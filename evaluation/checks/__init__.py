"""Standalone checks run by hand or by CI, not by the workflow's jobs: ``regress`` (result tables vs a committed
reference), ``audit`` (this checker vs Math-Verify on a generations file), ``bench_grader`` (checker throughput
vs Math-Verify)."""
