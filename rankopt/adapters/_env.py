"""Read the rank, world size and rendezvous address a launcher gave this process.

Supported launchers, first match wins:

==========  ==============================================================
torchrun    ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
            ``MASTER_PORT`` (also any launcher that sets these by hand)
Open MPI    ``OMPI_COMM_WORLD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``
MPICH       ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``
Slurm       ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``,
            ``SLURM_STEP_NODELIST`` / ``SLURM_JOB_NODELIST``
==========  ==============================================================

The rendezvous host is ``MASTER_ADDR`` when set; otherwise the first node of the
Slurm node list, or ``127.0.0.1`` when every rank runs on one host. The port is
``MASTER_PORT``, defaulting to 29500 (torch's default).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rankopt._limits import MAX_N
from rankopt._validation import RankoptInputError, check_host_name
from rankopt.errors import RendezvousError

__all__ = [
    "LaunchEnv",
    "detect",
    "first_slurm_host",
    "DEFAULT_PORT",
    "check_rendezvous",
    "init_gloo",
    "RendezvousError",
    "check_timeout",
    "resolve",
]

DEFAULT_PORT = 29500


@dataclass(frozen=True)
class LaunchEnv:
    """What the launcher told this process.

    Attributes
    ----------
    rank, world_size : int
        This process's launch rank and the number of processes.
    local_rank : int or None
        Index on its host, when the launcher says.
    master_addr : str
        Host of the rendezvous store (that of launch rank 0).
    master_port : int
        Port of the program's rendezvous store.
    launcher : str
        ``"torchrun"``, ``"env"`` (RANK set by hand), the name of the MPI engine
        whose launcher variables are set (``"openmpi"``, ``"mpich"``: each
        engine's ``launch_vars``, ``local_vars`` and ``job_vars``) or ``"slurm"``.
    agent_store : bool
        True under torchrun's agent-hosted store (``TORCHELASTIC_USE_AGENT_STORE``):
        the store already runs and outlives the worker processes.
    job_id : str
        Identifies this launch (used to keep store keys of restarts apart).
    """

    rank: int
    world_size: int
    local_rank: int | None
    master_addr: str
    master_port: int
    launcher: str
    agent_store: bool
    job_id: str


def _int(env: Mapping[str, str], key: str) -> int:
    try:
        return int(env[key])
    except ValueError:
        raise RankoptInputError(
            f"environment variable {key} must be an integer; got {env[key]!r}."
        ) from None


def _mpi_launcher(env: Mapping[str, str]) -> Any:
    """The registered MPI engine whose launcher variables ``env`` holds, or None."""
    from rankopt.engines import ENGINES

    return next((e for e in ENGINES.values() if e.family == "mpi" and e.launched(env)), None)


def first_slurm_host(nodelist: str) -> str:
    """First host of a Slurm node list such as ``"gpu[003-005,9],cpu1"``.

    Examples
    --------
    >>> first_slurm_host("gpu[003-005,9],cpu1")
    'gpu003'
    >>> first_slurm_host("node7,node2")
    'node7'
    """
    m = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not m or not m.group(1):
        raise RankoptInputError(f"cannot read a host from the Slurm node list {nodelist!r}.")
    prefix, ranges = m.group(1), m.group(2)
    if not ranges:
        return prefix.strip()
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def detect(
    env: Mapping[str, str], *, master_addr: str | None = None, master_port: int | None = None
) -> LaunchEnv:
    """Read the launch information from ``env`` (normally ``os.environ``).

    Parameters
    ----------
    env : mapping
        Environment variables.
    master_addr, master_port : optional
        Override ``MASTER_ADDR`` / ``MASTER_PORT``.

    Returns
    -------
    LaunchEnv

    Raises
    ------
    RankoptInputError
        If no launcher variables are found, they are malformed, or the
        rendezvous host cannot be determined.

    Examples
    --------
    >>> e = detect({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
    ...             "OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"})
    >>> (e.rank, e.world_size, e.master_addr, e.master_port, e.launcher)
    (3, 4, '127.0.0.1', 29500, 'openmpi')
    """
    single_host = False
    nodelist = None
    local_rank: int | None = None
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        if "LOCAL_RANK" in env:
            local_rank = _int(env, "LOCAL_RANK")
        job = f"{env.get('TORCHELASTIC_RUN_ID', '')}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    elif (mpi := _mpi_launcher(env)) is not None:
        launcher = mpi.name
        rank, size = (_int(env, v) for v in mpi.launch_vars)
        if mpi.local_vars is not None:
            local_var, local_size = mpi.local_vars
            if local_var in env:
                local_rank = _int(env, local_var)
            single_host = env.get(local_size) == env[mpi.launch_vars[1]]
        job = next((env[v] for v in mpi.job_vars if v in env), "")
    elif "SLURM_PROCID" in env and ("SLURM_NTASKS" in env or "SLURM_NPROCS" in env):
        launcher = "slurm"
        rank = _int(env, "SLURM_PROCID")
        size = _int(env, "SLURM_NTASKS" if "SLURM_NTASKS" in env else "SLURM_NPROCS")
        if "SLURM_LOCALID" in env:
            local_rank = _int(env, "SLURM_LOCALID")
        nodelist = env.get("SLURM_STEP_NODELIST", env.get("SLURM_JOB_NODELIST"))
        single_host = env.get("SLURM_STEP_NUM_NODES", env.get("SLURM_NNODES")) == "1"
        job = f"{env.get('SLURM_JOB_ID', '')}.{env.get('SLURM_STEP_ID', '')}"
    else:
        from rankopt.engines import ENGINES

        mpis = ", ".join(
            f"{e.launch_vars[0]} ({e.name})" for e in ENGINES.values() if e.family == "mpi"
        )
        raise RankoptInputError(
            f"no launcher found: expected RANK and WORLD_SIZE (torchrun), {mpis} or "
            "SLURM_PROCID (srun) in the environment."
        )
    if size < 1 or not 0 <= rank < size:
        raise RankoptInputError(
            f"launcher gave rank {rank} of world size {size} ({launcher} variables): a rank "
            "must be in 0..size-1."
        )
    if size > MAX_N:
        raise RankoptInputError(
            f"launcher gave world size {size}; rankopt reorders at most {MAX_N:,} processes."
        )
    if local_rank is not None and not 0 <= local_rank < size:
        raise RankoptInputError(f"launcher gave local rank {local_rank} of world size {size}.")
    addr = master_addr or env.get("MASTER_ADDR")
    if not addr:
        if nodelist:
            addr = first_slurm_host(nodelist)
        elif single_host or size == 1:
            addr = "127.0.0.1"
        else:
            raise RankoptInputError(
                "MASTER_ADDR is not set: export it (the host of rank 0) or pass --master-addr."
            )
    if addr is not None:
        check_host_name(addr, "MASTER_ADDR" if not master_addr else "--master-addr")
    if master_port is not None:
        port = int(master_port)
    elif env.get("MASTER_PORT"):
        port = _int(env, "MASTER_PORT")
    else:
        port = DEFAULT_PORT
    if not 0 < port < 65536:
        raise RankoptInputError(f"MASTER_PORT must be in 1..65535; got {port}.")
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return LaunchEnv(rank, size, local_rank, addr, port, launcher, agent, job)


def check_timeout(value: object, name: str = "timeout") -> float:
    """A rendezvous or peer timeout: positive, finite, at most :data:`rankopt._limits.MAX_TIMEOUT`.

    Examples
    --------
    >>> check_timeout(30)
    30.0
    """
    from rankopt._limits import MAX_TIMEOUT, check_bound, quote_name

    t = check_bound(value, name, MAX_TIMEOUT, unit="s")
    if not t >= MIN_TIMEOUT:
        raise RankoptInputError(
            f"{quote_name(name)} must be at least {MIN_TIMEOUT:g} s (a rendezvous takes longer); "
            f"got {value!r}."
        )
    return float(t)


#: Shortest rendezvous timeout accepted, seconds.
MIN_TIMEOUT = 0.1


def resolve(addr: str, timeout: float, what: str = "MASTER_ADDR") -> None:
    """Check that the rendezvous host ``addr`` resolves, within ``timeout`` seconds.

    A name that does not resolve is reported as such (not as a port or a
    peer problem), before any rendezvous starts; a resolver that does not
    answer in time is reported too. The lookup runs in a daemon thread, so a
    stuck resolver cannot hold the process past the timeout.

    Raises
    ------
    RankoptInputError
        If ``addr`` does not resolve or the lookup takes longer than ``timeout``.
    """
    import ipaddress
    import socket
    import threading

    try:
        ipaddress.ip_address(addr.partition("%")[0])
        return  # an address needs no lookup
    except ValueError:
        pass
    out: dict[str, BaseException | bool] = {}

    def lookup() -> None:
        try:
            socket.getaddrinfo(addr, None)
            out["ok"] = True
        except (OSError, UnicodeError) as exc:
            out["error"] = exc

    thread = threading.Thread(target=lookup, daemon=True, name="rankopt-resolve")
    thread.start()
    thread.join(timeout)
    if "ok" in out:
        return
    if "error" in out:
        raise RankoptInputError(
            f"{what} {addr!r} does not resolve to an address ({out['error']}): set it to "
            "the host of rank 0."
        )
    raise RankoptInputError(
        f"{what} {addr!r}: the name lookup did not answer within {timeout:g} s."
    )


def check_rendezvous(env: Mapping[str, str], timeout: float) -> LaunchEnv:
    """The launcher's variables checked and ``MASTER_ADDR`` resolved, before a rendezvous.

    Every ``env://`` rendezvous (``torch.distributed.init_process_group``)
    goes through this first: ranks and sizes in range, the port in range,
    the host name well formed and resolvable within ``timeout``.
    """
    info = detect(env)
    resolve(info.master_addr, timeout)
    return info


def init_gloo(timeout: float, name: str = "timeout", env: Mapping[str, str] | None = None) -> None:
    """``init_process_group("gloo")`` from the launcher's variables, bounded by ``timeout``.

    The variables are range-checked and ``MASTER_ADDR`` resolved first
    (:func:`check_rendezvous`); a rendezvous that does not complete in time (a
    peer that never starts) raises one clear error instead of waiting for
    torch's default of 30 minutes.

    Raises
    ------
    RankoptInputError
        Bad launcher variables, an address that does not resolve, a bad timeout.
    RendezvousError
        The rendezvous did not complete within ``timeout``.
    """
    import os
    from datetime import timedelta

    import torch.distributed as dist

    timeout = check_timeout(timeout, name)
    info = check_rendezvous(os.environ if env is None else env, timeout)
    try:
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    except Exception as exc:  # noqa: BLE001 - c10d's multi-line errors become one line
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise RendezvousError(
            f"the rendezvous at {info.master_addr}:{info.master_port} (rank {info.rank} of "
            f"{info.world_size}) did not complete within {timeout:g} s: {first[:200]}"
        ) from None
