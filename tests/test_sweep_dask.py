"""Dask: a LocalCluster with 2 worker processes gives the results of the local pool, both
through a Client and through the scheduler's address (what `--scheduler` does)."""

from __future__ import annotations

from pathlib import Path

from raidlab.sweep import sweep
from sweep_fixtures import experiment, stored


def test_local_cluster_equals_local_pool(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    exp = experiment(tmp_path)
    local = sweep(exp, workers=2, out=tmp_path / "local")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster, set_as_default=False) as client:
            via_client = sweep(exp, executor=client, out=tmp_path / "client")
        via_address = sweep(exp, executor=cluster.scheduler_address, out=tmp_path / "address")
    assert len(local) == 18 and (via_client["status"] == "done").all()
    assert list(local["run_id"]) == list(via_client["run_id"]) == list(via_address["run_id"])
    reference = stored(tmp_path / "local")
    assert stored(tmp_path / "client") == reference
    assert stored(tmp_path / "address") == reference
