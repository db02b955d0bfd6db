"""The torch.distributed (Gloo) probe on real local processes."""

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_scripts.probe_launch import assert_complete, assert_identical, collect_reports, job_env

from rankopt import RankoptInputError, load_measurement

pytest.importorskip("torch.distributed")
pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "mpi_scripts" / "probe_gloo.py"


def run_gloo(
    outdir: Path, n: int, *args: str, expect: int | None = None, limit: float = 90.0, **hooks: str
) -> dict[int, dict]:
    """Fork ``n`` Gloo processes; the reports of all (or ``expect``) ranks."""
    cmd = [sys.executable, str(SCRIPT), str(n), str(outdir), *args]
    return collect_reports(cmd, job_env(**hooks), outdir, n, expect, limit)


def test_gloo_probe_four_processes(tmp_path):
    n = 4
    reports = run_gloo(tmp_path, n, "timeout=20")
    assert all(r["error"] is None for r in reports.values()), reports
    ms = [load_measurement(tmp_path / f"rank{r}.npz") for r in range(n)]
    assert_complete(ms[0], n, "gloo")
    assert_identical(ms)


def test_gloo_unresponsive_rank_makes_every_rank_raise(tmp_path):
    # rank 1 sleeps at the start of round 2, where it meets rank 3 (0 and 2 are paired)
    n, timeout = 4, 2.0
    reports = run_gloo(
        tmp_path, n, f"timeout={timeout}", expect=n - 1, limit=60, RANKOPT_PROBE_TEST_STALL="1:2:15"
    )
    assert sorted(reports) == [0, 2, 3]
    for rep in reports.values():
        assert rep["error"] == "ProbeTimeoutError", rep
        assert "latency round 2 of 3" in rep["message"]
        assert "rank 1 did not answer rank 3 (pair (1, 3))" in rep["message"]
        assert rep["pairs"] == [[1, 3]] and rep["ranks"] == [1]
        assert rep["since_last_round"] < timeout + 1.0, rep


def test_gloo_measure_needs_an_initialised_group():
    from rankopt.probe.torch import measure

    with pytest.raises(RankoptInputError, match="torch.distributed is not initialised"):
        measure()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not found")
def test_cli_probe_under_torchrun(tmp_path):
    out = tmp_path / "net.npz"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        shutil.which("torchrun"),
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "-m",
        "rankopt",
        "probe",
        "--backend",
        "gloo",
        "-o",
        str(out),
        "--repeats",
        "3",
        "--timeout",
        "20",
    ]
    proc = subprocess.run(
        cmd,
        env=job_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = load_measurement(out)
    assert m.n == 2 and m.backend == "gloo" and m.bandwidth is not None
    assert proc.stderr.count("rankopt probe: probe latency: 1/1 rounds in ") == 1
    assert proc.stdout.count("wrote") == 1
