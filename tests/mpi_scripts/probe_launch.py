"""Shared by the probe's test scripts (running inside the job) and tests (launching it).

Inside the job, :func:`report_run` runs the probe on one rank and writes
OUTDIR/rank<r>.npz (the measurement) and OUTDIR/rank<r>.json: the error it
raised (if any), how long the probe ran, how long after its last completed
round it raised and when each phase ended. From the test, :func:`collect_reports`
launches the job and reads those reports back.
"""

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HOOKS = (
    "RANKOPT_PROBE_TEST_DELAY",
    "RANKOPT_PROBE_TEST_STALL",
    "RANKOPT_PROBE_TEST_SKEW",
    "RANKOPT_PROBE_TEST_HOSTS",
)


def job_env(**extra: str) -> dict[str, str]:
    """Environment for a launched job: this tree first on the path, no stray test hooks."""
    env = {k: v for k, v in os.environ.items() if k not in HOOKS}
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    env.update(extra)
    return env


def parse_kwargs(argv: list[str]) -> dict[str, Any]:
    """``KEY=JSON`` arguments as keyword arguments for ``measure``."""
    return {key: json.loads(value) for key, value in (arg.split("=", 1) for arg in argv)}


def report_run(outdir: str, rank: int, probe: Callable[[Callable[[Any], None]], Any]) -> dict:
    """Run ``probe(callback)`` and write this rank's measurement and report."""
    t0 = time.perf_counter()
    last = [t0]
    phases: dict[str, float] = {}

    def progress(p: Any) -> None:
        last[0] = time.perf_counter()
        if p.step == p.steps:
            phases[p.phase] = p.elapsed

    info: dict[str, Any] = {"error": None}
    try:
        m = probe(progress)
        if m is None:  # a rank other than the root of measure_at_root
            info["none"] = True
        else:
            m.save(os.path.join(outdir, f"rank{rank}.npz"))
    except Exception as exc:
        info = {"error": type(exc).__name__, "message": str(exc)}
        info.update({k: getattr(exc, k, None) for k in ("phase", "step", "pairs", "ranks")})
    now = time.perf_counter()
    info.update(elapsed=now - t0, since_last_round=now - last[0], phases=phases)
    path = os.path.join(outdir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as fh:  # the launcher polls for rank*.json: appear whole
        json.dump(info, fh)
    os.replace(path + ".tmp", path)
    return info


def wait_for_live_peers(outdir: str, n: int, info: dict, limit: float = 30.0) -> None:
    """After a failure, wait until every rank the error does not name has written its report.

    A rank that leaves without ``MPI_Finalize`` (which would wait for the dead peer) makes
    Open MPI end the whole job: without this wait it kills ranks that are still reporting.
    """
    silent = set(info.get("ranks") or [])
    paths = [os.path.join(outdir, f"rank{q}.json") for q in range(n) if q not in silent]
    deadline = time.monotonic() + limit
    while not all(map(os.path.exists, paths)) and time.monotonic() < deadline:
        time.sleep(0.05)


def collect_reports(
    cmd: list[str], env: dict[str, str], outdir: Path, n: int, expect: int | None, limit: float
) -> dict[int, dict]:
    """Launch the job; wait until ``expect`` ranks (default: all, and the job ended) reported.

    A rank left asleep on purpose is killed, with the whole process group. A job in which not
    a single rank reported within ``limit`` (it never got going on a loaded machine) is launched
    once more; a probe that hangs fails both times.
    """
    for attempt in (1, 2):
        for f in outdir.glob("rank*"):
            f.unlink()
        late, out, returncode = _launch(
            cmd, env, outdir, n if expect is None else expect, expect is None, limit
        )
        got = sorted(f.name for f in outdir.glob("rank*.json"))
        if late and not got and attempt == 1:
            continue
        if late:
            raise AssertionError(
                f"{n} processes did not report within {limit} s (attempt {attempt}, "
                f"reports: {got}); job output:\n" + out[-3000:]
            )
        break
    if expect is None:
        assert returncode == 0, out
    return {int(f.stem[4:]): json.loads(f.read_text()) for f in outdir.glob("rank*.json")}


def _launch(
    cmd: list[str], env: dict[str, str], outdir: Path, want: int, until_exit: bool, limit: float
) -> tuple[bool, str, int | None]:
    """Run the job until ``want`` reports exist (and it ended, with ``until_exit``) or ``limit``."""
    outdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + limit
    late = False
    try:
        while True:
            done = len(list(outdir.glob("rank*.json"))) >= want
            if done and (not until_exit or proc.poll() is not None):
                break
            if time.monotonic() > deadline:
                late = True
                break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _kill_ranks_of(outdir)
        out = proc.communicate()[0].decode(errors="replace")
    return late, out, proc.returncode


def _kill_ranks_of(outdir: Path) -> None:
    """Kill rank processes of this job that outlived the launcher (a rank left asleep on
    purpose may sit in its own process group)."""
    me = os.getpid()
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit() or int(proc_dir.name) == me:
            continue
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(outdir) in cmdline:
            try:
                os.kill(int(proc_dir.name), signal.SIGKILL)
            except OSError:
                pass


def assert_complete(m: Any, n: int, backend: str) -> None:
    """A full probe of ``n`` processes on this machine: shapes, values and counts."""
    import socket

    import numpy as np

    off = ~np.eye(n, dtype=bool)
    for mat in (m.latency, m.bandwidth):
        assert mat.shape == (n, n)
        assert np.all(np.diag(mat) == 0)
        assert np.all(np.isfinite(mat[off])) and np.all(mat[off] > 0)
    for spread in (m.latency_spread, m.bandwidth_spread):
        assert spread.shape == (n, n) and np.all(np.isfinite(spread)) and np.all(spread >= 0)
    # every pair measured exactly once per direction, in both phases
    np.testing.assert_array_equal(m.pair_counts, off.astype(np.int64))
    np.testing.assert_array_equal(m.bandwidth_counts, off.astype(np.int64))
    assert m.parameters["latency_rounds"] == (n - 1 if n % 2 == 0 else n)
    assert m.parameters["bandwidth_slots"] == n * (n - 1) // 2  # one host: sequential
    assert m.hosts == (socket.gethostname(),) * n
    assert m.host_groups().tolist() == [0] * n
    assert m.backend == backend and 0 < m.duration < 20
    # sane magnitudes for one machine: microseconds to milliseconds, MB/s to 100s of GB/s
    assert 1e-7 < np.median(m.latency[off]) < 1e-2
    assert 1e6 < np.median(m.bandwidth[off]) < 1e12


def assert_identical(ms: list[Any]) -> None:
    """Every rank returned the same measurement."""
    import numpy as np

    names = ("latency", "bandwidth", "latency_spread", "bandwidth_spread")
    for other in ms[1:]:
        for name in (*names, "pair_counts", "bandwidth_counts"):
            np.testing.assert_array_equal(getattr(other, name), getattr(ms[0], name))
        assert other.hosts == ms[0].hosts
        assert (other.started_at, other.finished_at) == (ms[0].started_at, ms[0].finished_at)
        assert other.parameters == ms[0].parameters
