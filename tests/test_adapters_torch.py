"""torch.distributed adapters on real Gloo processes: rankopt run under torchrun and mpiexec,
ordered_group and its re-init fallback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.torch]

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "mpi_scripts"
CHILD = str(SCRIPTS / "adapt_torch_child.py")
CLI = "import sys; from rankopt.cli import main; sys.exit(main())"  # = the `rankopt` script


@pytest.fixture(scope="module", autouse=True)
def _torch():
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist

    if not dist.is_gloo_available():
        pytest.skip("torch without Gloo")


def _free_port() -> int:
    """A port P free now with P + 1 free too: the launcher's default probe port is P + 1."""
    for _ in range(100):
        with socket.socket() as s, socket.socket() as nxt:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                nxt.bind(("127.0.0.1", port + 1))
            except (OSError, OverflowError):
                continue
            return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


def _env(out: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        ADAPT_OUT=str(out),
        OMP_NUM_THREADS="1",
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _run(cmd: list[str], out: Path, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, cwd=REPO, env=_env(out), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{cmd}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


def _reports(out: Path, n: int) -> list[dict]:
    reps = [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]
    assert [r["rank"] for r in reps] == list(range(n))
    return reps


def _check(reps: list[dict], order: list[int], argv: list[str]) -> None:
    n = len(order)
    assert [r["launch_rank"] for r in reps] == order  # new rank k is launch rank order[k]
    assert reps[0]["launch_rank"] == 0  # the store host keeps rank 0
    assert all(r["sum"] == n * (n + 1) / 2 and r["size"] == n for r in reps)  # Gloo allreduce
    assert [r["left_launch_rank"] for r in reps] == [order[k - 1] for k in range(n)]
    assert all(r["argv"] == argv for r in reps)  # the program ran unchanged
    assert len({r["pid"] for r in reps}) == n


def _mpiexec() -> str:
    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec not found")
    return exe


def test_torchrun_probe_solve_exec(tmp_path):
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found")
    _run(
        [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            "4",
            "-m",
            "rankopt.run",
            "--seed",
            "0",
            "--probe-option",
            "repeats=3",
            "--probe-option",
            "bandwidth=False",
            "--save",
            str(tmp_path / "order.txt"),
            "--",
            "python",
            CHILD,
            "--lr",
            "0.1",
        ],
        tmp_path,
    )
    order = [int(x) for x in (tmp_path / "order.txt").read_text().split()]
    assert sorted(order) == [0, 1, 2, 3] and order[0] == 0
    reps = _reports(tmp_path, 4)
    _check(reps, order, ["--lr", "0.1"])
    # torchrun's LOCAL_RANK is untouched: on one node it stays the launch rank
    assert all(r["local_rank"] == str(r["launch_rank"]) for r in reps)


def test_mpiexec_cli_solves_given_matrix(tmp_path):
    # cheap ring 0-2-1-3 among 4 processes; rank 0 pinned leaves two directions
    lat = np.full((4, 4), 1e-3)
    for a, b in [(0, 2), (2, 1), (1, 3), (3, 0)]:
        lat[a, b] = lat[b, a] = 1e-6
    np.fill_diagonal(lat, 0)
    np.save(tmp_path / "lat.npy", lat)
    master, probe = _free_port(), _free_port()
    # `rankopt run` (the console script's entry point) under mpiexec: no torchrun agent
    # store, so launch rank 0 hosts a temporary store on --probe-port, and opens the
    # program's store on MASTER_PORT before any rank learns the order; the program's
    # rank 0 (the same process) shares it, and every rank's program finds it listening
    proc = _run(
        [_mpiexec(), "-n", "4", "--oversubscribe", "-x", f"MASTER_PORT={master}",
         "-x", "ADAPT_CHECK_STORE=1",
         sys.executable, "-c", CLI, "run", "--latency", str(tmp_path / "lat.npy"),
         "--probe-port", str(probe), "--seed", "1", "--", sys.executable, CHILD],
        tmp_path,
    )  # fmt: skip
    reps = _reports(tmp_path, 4)
    order = [r["launch_rank"] for r in reps]
    assert order in ([0, 2, 1, 3], [0, 3, 1, 2])
    _check(reps, order, [])
    assert [r["store_listening"] for r in reps] == [True] * 4
    assert "rankopt run: 4 ranks" in proc.stderr


def test_mpiexec_nccl_keeps_nodes_contiguous(tmp_path):
    # launch ranks alternate between two "nodes"; NCCL mode must make each node contiguous
    port = _free_port()
    script = (
        f"RANKOPT_HOSTNAME=node$((OMPI_COMM_WORLD_RANK % 2)) exec {sys.executable} -m "
        f"rankopt.run --backend nccl --dry-run -q"
    )
    proc = _run(
        [_mpiexec(), "-n", "4", "--oversubscribe", "-x", f"MASTER_PORT={port}", "sh", "-c", script],
        tmp_path,
    )
    lines = sorted(ln.split() for ln in proc.stdout.splitlines() if ln.startswith("RANK"))
    new_of = {int(w[1]): int(w[3]) for w in lines}
    host_of = {int(w[1]): w[5] for w in lines}
    order = [k for k, _ in sorted(new_of.items(), key=lambda kv: kv[1])]
    assert order == [0, 2, 1, 3], proc.stdout
    assert [host_of[r] for r in order] == ["node0", "node0", "node1", "node1"]


def test_launcher_failure_is_reported_on_every_rank(tmp_path):
    (tmp_path / "bad.txt").write_text("1\n0\n")
    port = _free_port()
    proc = subprocess.run(
        [
            _mpiexec(),
            "-n",
            "2",
            "--oversubscribe",
            "-x",
            f"MASTER_PORT={port}",
            sys.executable,
            "-m",
            "rankopt.run",
            "--order",
            str(tmp_path / "bad.txt"),
            "--",
            "echo",
            "ran",
        ],
        cwd=REPO,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "ran" not in proc.stdout
    assert proc.stderr.count("keep rank 0 first") == 2  # both ranks, same message


def test_ordered_group_and_reinit(tmp_path):
    port = _free_port()
    proc = _run(
        [
            _mpiexec(),
            "-n",
            "4",
            "--oversubscribe",
            "-x",
            f"MASTER_PORT={port}",
            sys.executable,
            str(SCRIPTS / "adapt_torch_group.py"),
        ],
        tmp_path,
    )
    assert "adapt_torch_group ok n=4" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("squatter", ["socket", "store", "absent"])
def test_probe_port_held_by_a_stranger_is_one_error_within_the_timeout(tmp_path, squatter):
    # MASTER_PORT + 1 is held by another program -- a socket that accepts and never answers,
    # or another job's store -- so launch rank 0 cannot host the temporary store; or rank 0
    # never starts. The other ranks must not wait past --timeout: each prints one error line
    # and exits. The processes are started by hand (RANK, WORLD_SIZE, ...), as a launcher
    # that does not end the job when rank 0 fails would.
    import time

    import torch.distributed as dist

    master = _free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", master + 1))
    except OSError:
        holder.close()
        pytest.skip("the port after the free one is taken")
    foreign = None
    if squatter == "socket":
        holder.listen(16)
    else:
        holder.close()
    if squatter == "store":
        foreign = dist.TCPStore("127.0.0.1", master + 1, 1, True, wait_for_workers=False)
        dist.PrefixStore("rankopt/", foreign).set("hello", "rankopt-launch/1/another-job/3/0")
    n, timeout = 3, 6.0
    env = _env(tmp_path) | {
        "WORLD_SIZE": str(n),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master),
    }
    cmd = [sys.executable, "-m", "rankopt.run", "--timeout", str(timeout), "--", "echo", "ran"]
    limit = 3 * timeout + 60.0  # a guard against hangs; the start of the processes included
    ranks = range(1 if squatter == "absent" else 0, n)
    t0 = time.monotonic()
    procs = {
        r: subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in ranks
    }
    outs = {}
    try:
        for r, proc in procs.items():
            left = max(limit - (time.monotonic() - t0), 1.0)
            try:
                outs[r] = (*proc.communicate(timeout=left), proc.returncode)
            except subprocess.TimeoutExpired:
                pytest.fail(f"rank {r} waited on the port's holder past {limit:.0f} s")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        holder.close()
        del foreign
    elapsed = time.monotonic() - t0
    for r, (stdout, stderr, returncode) in outs.items():
        errors = [line for line in stderr.splitlines() if line.startswith("rankopt.run: error")]
        assert returncode == 1 and "ran" not in stdout.split(), stderr[-3000:]
        assert len(errors) == 1, stderr[-3000:]  # one line
        if r == 0:
            assert "cannot host the temporary store" in errors[0], errors
        else:
            expected = "belongs to another job" if squatter == "store" else "no rankopt store"
            assert expected in errors[0] and "--probe-port" in errors[0], errors
    assert elapsed < limit


def test_a_python_program_runs_in_the_launcher_process_as_python_would(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(
        "import logging, os, sys\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "logging.getLogger('x').info('info shows')\n"
        "print(__name__, sys.argv, os.environ['RANK'], sys.path[0] == os.path.dirname(__file__))\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    boom = tmp_path / "boom.py"
    boom.write_text("raise ValueError('from the program')\n")
    code = (
        "import logging, os, sys; logging.basicConfig(level=logging.WARNING)\n"
        "from rankopt.cli._run import run_inline, python_program\n"
        "env = {**os.environ, 'RANK': '3'}\n"
        "run_inline(python_program([sys.executable, *sys.argv[1:]]), env)\n"
    )
    ok = subprocess.run([sys.executable, "-c", code, str(prog), "7"], capture_output=True,
                        text=True, cwd=tmp_path, timeout=60)  # fmt: skip
    assert ok.returncode == 7, ok.stderr
    assert ok.stdout.strip() == f"__main__ ['{prog}', '7'] 3 True"
    assert "info shows" in ok.stderr  # the program's own logging set-up took effect
    bad = subprocess.run([sys.executable, "-c", code, str(boom)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=60)  # fmt: skip
    assert bad.returncode == 1
    assert "Traceback" in bad.stderr and "ValueError: from the program" in bad.stderr


def test_rankopt_run_prices_a_profiles_point_to_point_traffic(tmp_path):
    # profile a pipeline under torchrun, then rankopt run --workload prices its traffic
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found")
    pipe = str(SCRIPTS / "torch_pipeline.py")
    prof = tmp_path / "pipe.json"
    launch = [torchrun, "--standalone", "--nproc-per-node", "4"]
    _run([sys.executable, "-c", CLI, "profile", "-o", str(prof), "--", *launch, pipe], tmp_path)
    traffic = json.loads(prof.read_text())["traffic"]
    assert sorted((s, d) for s, d, _, _ in traffic["pairs"]) == [
        (0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2),
    ]  # fmt: skip
    out = tmp_path / "res.json"
    _run(
        [*launch, "-m", "rankopt.run", "--workload", str(prof), "--probe-option", "repeats=3",
         "--json", str(out), "--", "python", pipe],
        tmp_path,
    )  # fmt: skip
    res = json.loads(out.read_text())
    assert (res["collective"], res["algorithm"]) == ("point-to-point", "traffic")


@pytest.mark.parametrize("force", ["rule", "other"])
def test_ring_direction_trial_on_gloo_agrees_on_every_rank(tmp_path, force):
    port = _free_port()
    proc = _run(
        [_mpiexec(), "-n", "4", "--oversubscribe", "-x", f"MASTER_PORT={port}",
         sys.executable, str(SCRIPTS / "adapt_direction_gloo.py"), force],
        tmp_path,
    )  # fmt: skip
    assert f"adapt_direction_gloo ok n=4 force={force}" in proc.stdout
