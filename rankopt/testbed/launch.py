"""Start one process per rank inside the testbed's hosts.

Contents
--------
placement
    Which host each launch rank runs on: ``contiguous``, ``interleaved`` (what a
    scheduler that round-robins over racks does) or ``random`` (seeded).
hosts_option
    The same from a command-line value (a kind or a comma list of hosts).
run_mpi
    Open MPI: ``mpirun`` in the host of rank 0, daemons started in the other
    hosts through an rsh agent that enters their namespace.  MPICH (its
    ``mpiexec`` is hydra): the same agent starts hydra's proxies.
mpi_library
    ``"openmpi"`` or ``"mpich"``: the MPI whose launcher ``run_mpi`` uses.
run_gloo
    torch.distributed: one process per rank, ``GLOO_SOCKET_IFNAME=eth0``.

Every process gets its own UTS namespace with the host's name as hostname, so
that Open MPI and Gloo see different hosts and never use shared memory.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from rankopt._files import atomic_write_text
from rankopt._validation import RankoptInputError
from rankopt.testbed.netns import Testbed
from rankopt.testbed.topology import TestbedError, Topology

__all__ = [
    "placement",
    "hosts_option",
    "mpirun_command",
    "run_mpi",
    "run_gloo",
    "mpi_library",
    "MPI_MCA",
    "RING_MCA",
    "MPICH_ENV",
]

#: MCA settings that make Open MPI usable in the testbed (TCP only, no core
#: binding, no busy polling on an oversubscribed machine).
MPI_MCA: dict[str, str] = {
    "btl": "tcp,self",
    "pml": "ob1",
    "btl_tcp_if_include": "eth0",
    "mpi_yield_when_idle": "1",
}
#: Force the ring allreduce of Open MPI's tuned collectives.
RING_MCA: dict[str, str] = {
    "coll_tuned_use_dynamic_rules": "1",
    "coll_tuned_allreduce_algorithm": "4",
}

#: Environment that makes MPICH usable in the testbed. UCX would otherwise
#: reach the other namespaces through shared memory (they share the host's
#: boot id and /dev/shm), bypassing the emulated network: TCP on eth0 only.
MPICH_ENV: dict[str, str] = {
    "MPIR_CVAR_CH4_NETMOD": "ucx",
    "UCX_TLS": "tcp,self",
    "UCX_NET_DEVICES": "eth0",
}
#: Open MPI's allreduce algorithm ids that MPICH has a CVAR value for.
_MPICH_ALLREDUCE = {"3": "recursive_doubling", "4": "ring", "6": "reduce_scatter_allgather"}

_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _base_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    # workers import the same rankopt as this process, installed or not
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        **_THREAD_ENV,
        **(extra or {}),
        "PYTHONPATH": root + (os.pathsep + path if path else ""),
    }


def placement(
    n_hosts: int,
    kind: str = "interleaved",
    *,
    shape: Sequence[int] = (),
    groups: Sequence[np.ndarray] | None = None,
    rng: None | int | np.random.Generator = None,
) -> np.ndarray:
    """Host of each launch rank.

    Parameters
    ----------
    n_hosts : int
    kind : {"contiguous", "interleaved", "random"}
        ``interleaved`` deals ranks round-robin over the top level first
        (pods), then racks, like a scheduler that spreads a job: with 2 racks
        of 4, ranks 0, 2, 4, 6 land in rack 0.  A group that has run out of
        hosts is skipped (racks of unequal sizes).
    shape : sequence of int
        Group sizes per level, coarsest first, e.g. ``(pods, racks_per_pod,
        hosts_per_rack)``; their product must be ``n_hosts``.
    groups : sequence of ndarray, optional
        Instead of ``shape``: the group of every host per level, finest first
        (:meth:`Topology.groups`), for groups of unequal sizes.
    rng : None, int or Generator
        Seed for ``random``.

    Examples
    --------
    >>> placement(8, "interleaved", shape=(2, 4)).tolist()
    [0, 4, 1, 5, 2, 6, 3, 7]
    >>> racks = np.array([0, 0, 0, 1, 1, 2])
    >>> placement(6, "interleaved", groups=[racks]).tolist()
    [0, 3, 5, 1, 4, 2]
    """
    if kind == "contiguous":
        return np.arange(n_hosts)
    if kind == "random":
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        return gen.permutation(n_hosts)
    if kind != "interleaved":
        raise RankoptInputError(
            f"`kind` must be 'contiguous', 'interleaved' or 'random'; got {kind!r}."
        )
    if groups is None:
        shape = tuple(shape) or (n_hosts,)
        if int(np.prod(shape)) != n_hosts:
            raise RankoptInputError(f"`shape` {shape} does not multiply to {n_hosts} hosts.")
        hosts = np.arange(n_hosts)
        groups = [hosts // int(np.prod(shape[k:])) for k in range(len(shape) - 1, 0, -1)]
    return np.asarray(_deal(np.arange(n_hosts), [np.asarray(g) for g in groups]), dtype=np.int64)


def _deal(hosts: np.ndarray, groups: list[np.ndarray]) -> list[int]:
    # round-robin over the children of the coarsest level, each dealt the same way
    if not groups:
        return [int(h) for h in hosts]
    top = groups[-1][hosts]
    parts = [_deal(hosts[top == g], groups[:-1]) for g in np.unique(top)]
    out: list[int] = []
    for i in range(max(len(p) for p in parts)):
        out += [p[i] for p in parts if i < len(p)]
    return out


def hosts_option(topology: Topology, spec: str, *, seed: int = 0) -> np.ndarray:
    """Host of every launch rank from ``--hosts``: a placement kind or a comma list.

    Examples
    --------
    >>> from rankopt.testbed.topology import Topology
    >>> hosts_option(Topology(racks=(2, 1)), "interleaved").tolist()
    [0, 2, 1]
    >>> hosts_option(Topology(2, 2), "3,2,1,0").tolist()
    [3, 2, 1, 0]
    """
    n = topology.n_hosts
    if spec in ("interleaved", "random", "contiguous"):
        return placement(n, spec, groups=topology.groups(), rng=seed)
    try:
        hosts = np.array([int(x) for x in spec.split(",")], dtype=np.int64)
    except ValueError:
        raise RankoptInputError(
            f"`hosts` must be interleaved, random, contiguous or a comma list of host "
            f"indices; got {spec!r}."
        ) from None
    if hosts.size == 0 or hosts.min() < 0 or hosts.max() >= n:
        raise RankoptInputError(f"`hosts` must name hosts 0..{n - 1}; got {spec!r}.")
    return hosts


def _uts(ns: str) -> list[str]:
    # own hostname per process: Open MPI and Gloo then see distinct hosts
    return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', ns]


def _agent(tb: Testbed, directory: Path) -> Path:
    cases = "\n".join(
        f"  {tb.topology.address(h)}) ns={tb.ns(h)};;" for h in range(tb.topology.n_hosts)
    )
    script = directory / "agent.sh"
    atomic_write_text(
        script,
        f"""#!/bin/sh
# options before the host (hydra's rsh/ssh launcher may pass some) are dropped
while [ "${{1#-}}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
{cases}
  *) echo "rankopt testbed agent: unknown host $host" >&2; exit 1;;
esac
exec ip netns exec "$ns" unshare --uts -- sh -c "hostname $ns && $*"
""",
        what="testbed agent script",
    )
    script.chmod(0o755)
    return script


def _check_tools(*names: str) -> None:
    for name in names:
        if shutil.which(name) is None:
            raise TestbedError(
                f"`{name}` is not on PATH; it is needed to run ranks in the testbed."
            )


@functools.lru_cache(maxsize=1)
def _hydra() -> str | None:
    # MPICH's mpiexec beside the workers' interpreter, else on PATH
    for cand in (Path(sys.executable).parent / "mpiexec", shutil.which("mpiexec")):
        if cand is None or not Path(cand).exists():
            continue
        try:
            out = subprocess.run(
                [str(cand), "--version"], capture_output=True, text=True, timeout=60
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "HYDRA" in out:
            return str(cand)
    return None


def mpi_library(kind: str = "auto") -> str:
    """The MPI whose launcher :func:`run_mpi` uses: ``"openmpi"`` or ``"mpich"``.

    ``"auto"``: MPICH when the ``mpiexec`` beside this interpreter (or the
    first on PATH) is hydra, MPICH's launcher, else Open MPI (``mpirun``).
    """
    if kind not in ("auto", "openmpi", "mpich"):
        raise RankoptInputError(f"`mpi` must be 'auto', 'openmpi' or 'mpich'; got {kind!r}.")
    if kind != "auto":
        return kind
    return "mpich" if _hydra() is not None else "openmpi"


def _mpich_env(mca: Mapping[str, str]) -> dict[str, str]:
    # the MCA settings a run asks for, as MPICH CVARs (only the forced allreduce has one)
    env = dict(MPICH_ENV)
    for key, value in mca.items():
        if key in MPI_MCA or key == "coll_tuned_use_dynamic_rules":
            continue
        if key == "coll_tuned_allreduce_algorithm" and str(value) in _MPICH_ALLREDUCE:
            env["MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"] = _MPICH_ALLREDUCE[str(value)]
            continue
        raise TestbedError(f"MCA parameter {key}={value} has no MPICH equivalent here.")
    return env


def _hydra_cmd(tb: Testbed, hosts: Sequence[int] | np.ndarray, d: Path) -> list[str]:
    exe = _hydra()
    if exe is None:
        raise TestbedError("MPICH's mpiexec (hydra) is not beside this python or on PATH.")
    hostfile = d / "hosts"
    atomic_write_text(
        hostfile, "".join(f"{tb.topology.address(int(h))}:1\n" for h in hosts), what="hostfile"
    )
    # one proxy per host started by the agent; hydra's control traffic on eth0
    return [
        exe,
        "-n",
        str(len(hosts)),
        "-f",
        str(hostfile),
        "-launcher",
        "rsh",
        "-launcher-exec",
        str(_agent(tb, d)),
        "-iface",
        "eth0",
    ]


def mpirun_command(tb: Testbed, hosts: Sequence[int] | np.ndarray, folder: Path) -> list[str]:
    """Open MPI's ``mpirun`` line that puts launch rank ``r`` on host ``hosts[r]``.

    Writes its hostfile and the remote agent (which enters a host's namespace)
    into ``folder``, which must outlive the job; the MCA parameters and the
    program are the caller's to add. :func:`run_mpi` runs it.
    """
    hostfile = Path(folder) / "hosts"
    text = "".join(f"{tb.topology.address(int(h))}\n" for h in hosts)
    atomic_write_text(hostfile, text, what="testbed hostfile")
    return [
        "mpirun", "-n", str(len(hosts)), "--hostfile", str(hostfile),
        "--map-by", "seq", "--bind-to", "none",
        "--mca", "plm_rsh_agent", str(_agent(tb, Path(folder))),
    ]  # fmt: skip


def run_mpi(
    tb: Testbed,
    hosts: Sequence[int] | np.ndarray,
    argv: Sequence[str],
    *,
    mca: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
    capture: bool = True,
    check: bool = True,
    mpi: str = "auto",
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with Open MPI or MPICH, launch rank ``r`` on host ``hosts[r]``.

    Parameters
    ----------
    tb : Testbed
        A testbed that is up.
    hosts : sequence of int
        Host of each rank (see :func:`placement`).
    argv : sequence of str
        The program, e.g. ``[sys.executable, "-m", "rankopt.testbed.worker_mpi", cfg]``.
    mca : mapping, optional
        Extra MCA parameters (added to :data:`MPI_MCA`).
    env : mapping, optional
        Extra environment variables for every rank.
    timeout : float
        Seconds before the whole job is killed.
    capture : bool
        Capture stdout/stderr (else they go to this process's).
    check : bool
        Raise :class:`TestbedError` when the job fails (else return its status).
    mpi : {"auto", "openmpi", "mpich"}
        Which launcher (:func:`mpi_library`). With MPICH, :data:`MPICH_ENV`
        is set and ``mca`` may only force the allreduce algorithm
        (:data:`RING_MCA`), which becomes ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``.

    Returns
    -------
    subprocess.CompletedProcess
        With ``stdout``/``stderr`` when captured.
    """
    if mpi_library(mpi) == "mpich":
        return _run_mpich(tb, hosts, argv, mca, env, timeout, capture, check)
    _check_tools("mpirun", "unshare")
    params = {**MPI_MCA, **(mca or {})}
    with tempfile.TemporaryDirectory(prefix="rankopt-testbed-") as d:
        cmd = mpirun_command(tb, hosts, Path(d))
        for k, v in params.items():
            cmd += ["--mca", k, str(v)]
        full_env = {
            **_base_env(env),
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        }
        return _launch_from(tb, hosts, [*cmd, *argv], full_env, timeout, "mpirun", capture, check)


def _launch_from(
    tb: Testbed,
    hosts: Sequence[int] | np.ndarray,
    cmd: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    what: str,
    capture: bool,
    check: bool,
) -> subprocess.CompletedProcess[str]:
    """Run a launcher command in the first host's namespace and wait for it."""
    first = int(hosts[0])
    proc = tb.popen(
        first,
        [*_uts(tb.ns(first)), *cmd],
        env=env,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
        start_new_session=True,
    )
    return _wait([proc], timeout, what, check)[0]


def _run_mpich(
    tb: Testbed,
    hosts: Sequence[int] | np.ndarray,
    argv: Sequence[str],
    mca: Mapping[str, str] | None,
    env: Mapping[str, str] | None,
    timeout: float,
    capture: bool,
    check: bool,
) -> subprocess.CompletedProcess[str]:
    _check_tools("unshare")
    full_env = _base_env({**_mpich_env(mca or {}), **(env or {})})
    with tempfile.TemporaryDirectory(prefix="rankopt-testbed-") as d:
        cmd = _hydra_cmd(tb, hosts, Path(d))
        return _launch_from(
            tb, hosts, [*cmd, *argv], full_env, timeout, "mpiexec (MPICH)", capture, check
        )


def run_gloo(
    tb: Testbed,
    hosts: Sequence[int] | np.ndarray,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    rank: Sequence[int] | None = None,
    port: int = 29511,
    timeout: float = 600.0,
    capture: bool = True,
    check: bool = True,
) -> list[subprocess.CompletedProcess[str]]:
    """Start ``argv`` once per rank for torch.distributed (Gloo) and wait.

    Process ``r`` runs on host ``hosts[r]`` with ``RANK=rank[r]`` (default
    ``r``), ``WORLD_SIZE``, ``MASTER_ADDR`` (the host of the process with
    ``RANK=0``), ``MASTER_PORT``, ``LOCAL_RANK=0``, ``LOCAL_WORLD_SIZE=1`` and
    ``GLOO_SOCKET_IFNAME=eth0``.  Passing ``rank=rank_of`` applies an order the
    way a launcher wrapper does.  ``capture`` and ``check`` as in :func:`run_mpi`.

    Returns one CompletedProcess per rank; raises :class:`TestbedError` when any
    fails (with ``check``).
    """
    _check_tools("unshare")
    n = len(hosts)
    ranks = list(range(n)) if rank is None else [int(x) for x in rank]
    if sorted(ranks) != list(range(n)):
        raise RankoptInputError("`rank` must be a permutation of range(len(hosts)).")
    master = int(hosts[ranks.index(0)])
    procs = []
    try:
        for r in range(n):
            h = int(hosts[r])
            e = {
                **_base_env(env),
                "RANK": str(ranks[r]),
                "WORLD_SIZE": str(n),
                "LOCAL_RANK": "0",
                "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": tb.topology.address(master),
                "MASTER_PORT": str(port),
                "GLOO_SOCKET_IFNAME": "eth0",
                "TESTBED_LAUNCH_RANK": str(r),
            }
            procs.append(
                tb.popen(
                    h,
                    [*_uts(tb.ns(h)), *argv],
                    env=e,
                    stdout=subprocess.PIPE if capture else None,
                    stderr=subprocess.PIPE if capture else None,
                    text=True,
                    start_new_session=True,
                )
            )
    except BaseException:
        _kill(procs)
        raise
    return _wait(procs, timeout, "gloo job", check)


def _kill(procs: Sequence[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except (ProcessLookupError, PermissionError):
                p.kill()
    for p in procs:
        p.wait()


def _wait(
    procs: Sequence[subprocess.Popen[str]], timeout: float, what: str, check: bool = True
) -> list[subprocess.CompletedProcess[str]]:
    deadline = time.monotonic() + timeout
    out: list[subprocess.CompletedProcess[str]] = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
            if p.returncode != 0 and check:
                _kill(procs)
                tail = "\n".join((stderr or stdout or "").strip().splitlines()[-15:])
                raise TestbedError(f"{what} failed (exit {p.returncode}):\n{tail}")
    except subprocess.TimeoutExpired:
        _kill(procs)
        raise TestbedError(f"{what} did not finish within {timeout:g} s.") from None
    except BaseException:
        _kill(procs)
        raise
    return out
