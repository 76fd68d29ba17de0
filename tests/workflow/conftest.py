"""The CI-size DAG run locally once per test session, shared by test_workflow.py (determinism, reference,
kill and resume) and test_slurm_cluster.py (the same DAG through SLURM must give the same tables)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ci_local_run(tmp_path_factory):
    from test_workflow import run_dag

    out = tmp_path_factory.mktemp("ci_local") / "a"
    run_dag(out)
    return out
