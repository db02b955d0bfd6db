"""The launcher behind ``rankopt run`` and ``python -m rankopt.run``.

Each process started by torchrun, mpiexec or srun runs this first:

1. read its launch rank, world size and rendezvous address (:mod:`._env`);
2. open a *temporary* store: under torchrun's agent store, the agent's store
   (already running, outlives the workers) under a ``rankopt/<job>/`` prefix;
   otherwise a TCPStore hosted by launch rank 0 on ``--probe-port`` (default
   ``MASTER_PORT + 1``), so the program's own ``MASTER_PORT`` is never bound
   by us and is free when the program starts. The other ranks reach it within
   ``--timeout`` and check that it answers ``hello`` with this job's token, so a
   port held by another program or job is an error, not a wait;
3. probe the network over a temporary Gloo group (``rankopt.probe.torch.measure``),
   unless an order or a matrix is given;
4. rank 0 solves with rank 0 pinned (``keep_rank0=True``: the process that hosts
   the program's store keeps rank 0) -- node-granular for NCCL -- and publishes
   the order; every rank reads it and acknowledges; rank 0 keeps the temporary
   store up until every rank has acknowledged;
5. the caller execs the program with ``RANK`` set to the new rank
   (``LOCAL_RANK``, ``CUDA_VISIBLE_DEVICES`` and every other variable untouched).

Every failure is published through the store, so all ranks that are alive take
the same decision: fail, or (``--on-error identity``) run with the launch order.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.adapters._common import (
    as_order,
    node_index,
    option_digests,
    parse_options,
    save_order,
)
from rankopt.adapters._env import LaunchEnv, check_timeout, detect, resolve
from rankopt.errors import LaunchError

__all__ = ["add_arguments", "launch", "LaunchDecision", "LaunchOptions", "child_env"]

logger = logging.getLogger("rankopt")


@dataclass(frozen=True)
class LaunchDecision:
    """What the launcher decided for this process.

    Attributes
    ----------
    rank : int
        Launch rank of this process.
    new_rank : int
        Rank the program gets.
    order : ndarray of int64
        ``order[k]`` = launch rank of the process that gets rank ``k``.
    hosts : tuple of str
        Host label of every launch rank.
    summary : str
        One line describing the result (for logs).
    error : str or None
        Why the launch order is kept (``on_error="identity"`` only).
    """

    rank: int
    new_rank: int
    order: NDArray[np.int64]
    hosts: tuple[str, ...]
    summary: str
    error: str | None = None


@dataclass(frozen=True)
class LaunchOptions:
    """What the launcher does: one field per ``rankopt run`` option, the same defaults.

    :meth:`from_args` reads them from the parsed command line
    (:func:`add_arguments`); a program builds one directly.

    Attributes
    ----------
    backend : str
        The program's backend (``"gloo"``, ``"nccl"``): the engine its calls
        are priced with and, for NCCL, node-granular orders.
    collective, algorithm : str
        What is optimised when no engine decides the algorithm.
    solve : mapping, optional
        Further keyword arguments of :func:`rankopt.solve` (``engine``,
        ``workload``, ``objective``, ``nbytes``, ``uplink_bandwidth``,
        ``method``, ``rng``, ``time_limit``), as
        :func:`rankopt._model_args.model_options` gives them. Default: what
        ``rankopt run`` does with no flags, ``{"engine": backend}`` (every call
        priced with the algorithm the backend runs at its size).
    granularity : {"auto", "rank", "node"}
    order, latency : str, optional
        An order file to apply, or a latency matrix to solve on, instead of probing.
    probe : mapping
        Keyword arguments of :func:`rankopt.probe.torch.measure`; ``"cache"``
        takes what :func:`rankopt.adapters.cache.resolve_cache` does (default
        ``True``: the probe cache, as ``rankopt run`` without ``--no-cache``).
    master_addr, master_port, probe_port, hostname :
        Rendezvous overrides and this process's host label.
    timeout : float
        Seconds to wait for peers.
    on_error : {"fail", "identity"}
    save, json : str, optional
        Files rank 0 writes: the order, the solve result.
    verify : bool
        Time the order against the launch order first; keep it only if it wins.
    direction_trial : bool
        Where the solve found a ring beside another tenant's load that the model
        prices alike with its groups the other way round, time both with the
        collective before applying one (:mod:`rankopt.adapters.direction`;
        ``rankopt run --no-direction-trial`` turns it off).
    progress : bool
        Rank 0 prints the probe's and the solve's progress on standard error
        (``rankopt run`` without ``-q``; a quick phase prints nothing).
    program_store : bool
        Launch rank 0 will run the program in this process (``rankopt run`` with a
        Python program): without an agent store (torchrun's), it opens the
        program's rendezvous store (a multi-tenant ``TCPStore`` on
        ``MASTER_PORT``, which the program's ``init_process_group`` on rank 0
        shares) before any rank learns the order, and keeps it for the program.
        The other ranks' programs then find it listening: a ``TCPStore`` client
        whose first connection is refused retries only after up to 0.7 s.
    """

    backend: str = "gloo"
    collective: str = "allreduce"
    algorithm: str = "ring"
    solve: Mapping[str, Any] | None = None
    granularity: str = "auto"
    order: str | None = None
    latency: str | None = None
    probe: Mapping[str, Any] = field(default_factory=lambda: {"cache": True})
    master_addr: str | None = None
    master_port: int | None = None
    probe_port: int | None = None
    hostname: str | None = None
    timeout: float = 300.0
    on_error: str = "fail"
    save: str | None = None
    json: str | None = None
    verify: bool = False
    direction_trial: bool = True
    progress: bool = True
    program_store: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LaunchOptions:
        """The options of a command line parsed by :func:`add_arguments`.

        The model options are checked here, on every rank, before any
        communication (a bad ``--workload`` is an error everywhere at once).
        """
        from rankopt._model_args import cache_option, launcher_model_options, topology_option

        check_timeout(args.timeout, "--timeout")  # before any communication, on every rank
        solve = launcher_model_options(args)
        probe = parse_options(getattr(args, "probe_option", []))
        probe.setdefault("cache", cache_option(args))
        topology = topology_option(args)
        if topology is not None:
            probe["topology"] = topology
        return cls(
            backend=args.backend,
            collective=args.collective,
            algorithm=args.algorithm,
            solve=solve,
            granularity=args.granularity,
            order=args.order,
            latency=args.latency,
            probe=probe,
            master_addr=args.master_addr,
            master_port=args.master_port,
            probe_port=args.probe_port,
            hostname=args.hostname,
            timeout=args.timeout,
            on_error=args.on_error,
            save=args.save,
            json=getattr(args, "json", None),
            verify=bool(getattr(args, "verify", False)),
            direction_trial=bool(getattr(args, "direction_trial", True)),
            progress=not getattr(args, "quiet", False),
        )


def port_value(text: str) -> int:
    """``--master-port``, ``--probe-port``: a TCP port, 1..65535 (argparse names the option).

    >>> port_value("29500")
    29500
    """
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number; got {text!r}.") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 1..65535; got {port}.")
    return port


def add_arguments(p: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    """Add the launcher options and the ``command`` positional to ``p``.

    ``quiet=False`` leaves out ``-q/--quiet`` (for a parent parser that has it).
    """
    from rankopt.engines import names

    p.add_argument(
        "--backend",
        choices=names("torch"),
        default="gloo",
        help="backend the program uses: nccl keeps each node's ranks contiguous "
        "and orders nodes (only node order reaches NCCL's rings and trees)",
    )
    from rankopt._model_args import add_model_arguments
    from rankopt.network.core import DDP_BUCKET_BYTES

    add_model_arguments(
        p, default_nbytes=DDP_BUCKET_BYTES, nbytes_note=", torch DDP's gradient bucket"
    )
    p.add_argument(
        "--granularity",
        choices=("auto", "rank", "node"),
        default="auto",
        help="order ranks or whole nodes (auto: node for nccl, rank for gloo)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--order",
        metavar="FILE",
        default=None,
        help="apply this order (.npy/.json/text) instead of probing",
    )
    src.add_argument(
        "--latency",
        metavar="FILE",
        default=None,
        help="solve on this latency matrix (seconds) instead of probing",
    )
    p.add_argument(
        "--probe-option",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="extra keyword for rankopt.probe.torch.measure, e.g. repeats=5 (repeatable)",
    )
    p.add_argument("--master-addr", default=None, help="override MASTER_ADDR")
    p.add_argument("--master-port", type=port_value, default=None, help="override MASTER_PORT")
    p.add_argument(
        "--probe-port",
        type=port_value,
        default=None,
        help="port of the temporary store on MASTER_ADDR when no torchrun agent "
        "store runs (default: MASTER_PORT + 1)",
    )
    p.add_argument(
        "--hostname",
        default=None,
        help="host label of this process (default: $RANKOPT_HOSTNAME or the hostname)",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for peers")
    p.add_argument(
        "--on-error",
        choices=("fail", "identity"),
        default="fail",
        help="when no order can be found: fail, or run with the launch order",
    )
    p.add_argument(
        "--save", metavar="FILE", default=None, help="rank 0 writes the order (.npy/.json/text)"
    )
    from rankopt._model_args import add_entry_outputs

    add_entry_outputs(p, engine="Gloo")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="rank 0 prints every process's new RANK (and host) instead of running the program",
    )
    if quiet:
        p.add_argument("-q", "--quiet", action="store_true", help="no summary line on rank 0")
    p.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        help="-- program and arguments (e.g. -- python train.py --lr 0.1)",
    )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _token(info: LaunchEnv) -> str:
    """What the temporary store of this job answers to ``hello`` (the same on every rank)."""
    return f"rankopt-launch/1/{info.job_id}/{info.world_size}/{info.master_port}"


def _leave_without_teardown() -> None:
    """At exit, end the process with ``os._exit(1)``: a connection attempt is still blocked
    inside torch, whose teardown at interpreter exit would abort the process."""
    import atexit

    def leave() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    atexit.register(leave)


def _wait_listening(addr: str, port: int, deadline: float) -> None:
    """Return once ``addr:port`` accepts a connection, it fails otherwise than by refusing
    it, or ``deadline`` (monotonic) passes.

    A ``TCPStore`` client whose first connection is refused waits up to 0.7 s before it
    tries again; ranks that start before the store's host would each lose that. A
    refused plain connection costs nothing, so the port is tried every few
    milliseconds first (the server takes an empty connection without complaint).
    """
    delay = 0.002
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            socket.create_connection((addr, port), timeout=min(remaining, 1.0)).close()
            return
        except ConnectionRefusedError:
            time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, 0.01)
        except OSError:  # unreachable, no answer: the store's own attempt says why
            return


def _connect(addr: str, port: int, n: int | None, deadline: float) -> Any:
    """A client ``TCPStore`` to ``addr:port``, connected before ``deadline`` (monotonic).

    The constructor retries by itself for about 2.5 times its timeout, and against a
    socket that accepts but never answers it may not return at all: each attempt runs
    in a daemon thread that is abandoned at the deadline.
    """
    import threading

    import torch.distributed as dist

    _wait_listening(addr, port, deadline)
    last: BaseException = TimeoutError("no connection")
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise last
        attempt = timedelta(seconds=max(min(remaining / 3.0, 5.0), 0.2))
        out: dict[str, Any] = {}

        def connect(attempt: timedelta = attempt, out: dict[str, Any] = out) -> None:
            try:
                out["store"] = dist.TCPStore(addr, port, n, False, attempt, wait_for_workers=False)
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                out["error"] = exc

        thread = threading.Thread(target=connect, daemon=True, name="rankopt-connect")
        thread.start()
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():  # the attempt's own timeout may end it just after the deadline
            thread.join(min(3 * attempt.total_seconds(), 1.0))
        if "store" in out:
            return out["store"]
        if thread.is_alive():
            _leave_without_teardown()
            raise TimeoutError(f"{addr}:{port} accepted the connection but never answered")
        last = out["error"]
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))


def _open_store(info: LaunchEnv, probe_port: int | None, timeout: timedelta) -> Any:
    """The store the launch goes through: ``(prefixed store, base store)``.

    Every rank other than the host reaches it within ``timeout`` or raises
    :class:`LaunchError`. The temporary store is verified before use: its host
    sets ``hello`` to this job's token first, and a client that finds another
    token, or none within ``timeout`` (a port held by another program, another
    job's store), raises instead of waiting on a stranger.
    """
    import torch.distributed as dist

    deadline = time.monotonic() + timeout.total_seconds()
    if info.agent_store:
        where = f"{info.master_addr}:{info.master_port}"
        try:
            base = _connect(info.master_addr, info.master_port, None, deadline)
        except Exception as exc:  # noqa: BLE001 - turned into a clear message
            raise LaunchError(
                f"cannot reach torchrun's agent store at {where} within "
                f"{timeout.total_seconds():g} s ({_first_line(exc)})"
            ) from exc
        base.set_timeout(timeout)
        return dist.PrefixStore(f"rankopt/{info.job_id}/", base), base
    port = probe_port if probe_port is not None else info.master_port + 1
    if not 0 < port < 65536:
        raise RankoptInputError(f"--probe-port must be in 1..65535; got {port}.")
    where = f"{info.master_addr}:{port}"
    token = _token(info)
    if info.rank == 0:
        try:
            base = dist.TCPStore(
                info.master_addr, port, info.world_size, True, timeout, wait_for_workers=False
            )
        except Exception as exc:  # noqa: BLE001 - turned into a clear message
            raise LaunchError(
                f"cannot host the temporary store at {where} ({_first_line(exc)}); "
                f"pick a free port with --probe-port"
            ) from exc
        store = dist.PrefixStore("rankopt/", base)
        store.set("hello", token)
        return store, base
    hint = f"no rankopt store of this job answered at {where} within {timeout.total_seconds():g} s"
    try:
        base = _connect(info.master_addr, port, info.world_size, deadline)
    except Exception as exc:  # noqa: BLE001 - turned into a clear message
        raise LaunchError(
            f"{hint} ({_first_line(exc)}); is launch rank 0 running, and is the port free? "
            f"pick a free one with --probe-port"
        ) from exc
    store = dist.PrefixStore("rankopt/", base)
    try:
        base.set_timeout(timedelta(seconds=max(deadline - time.monotonic(), 0.1)))
        answer = store.get("hello").decode(errors="replace")
    except Exception as exc:  # noqa: BLE001 - a store of another program or job
        raise LaunchError(
            f"{hint}: the store there did not say hello ({_first_line(exc)}); another "
            f"program or job holds the port: pick a free one with --probe-port"
        ) from exc
    if answer != token:
        raise LaunchError(
            f"the store at {where} belongs to another job (it answered {answer!r}, this "
            f"job is {token!r}); pick a free port with --probe-port"
        )
    base.set_timeout(timeout)
    return store, base


#: The program's rendezvous store that launch rank 0 opened for it: kept for the process's life.
_PROGRAM_STORE: list[Any] = []


def _open_program_store(info: LaunchEnv, timeout: timedelta) -> None:
    """Launch rank 0: listen on ``MASTER_PORT`` for the program's store, if the port is free.

    A multi-tenant server, as ``init_process_group``'s ``env://`` and ``tcp://``
    rendezvous create theirs: the program's store on rank 0, in this process,
    shares it. Opened before the order is published, so no other rank's program
    connects before it listens (a refused ``TCPStore`` client waits up to 0.7 s
    before it tries again). A port that cannot be bound is left to the program.
    """
    import torch.distributed as dist

    try:
        _PROGRAM_STORE.append(
            dist.TCPStore(
                info.master_addr,
                info.master_port,
                info.world_size,
                True,
                timeout,
                wait_for_workers=False,
                multi_tenant=True,
                use_libuv=os.environ.get("USE_LIBUV", "1") == "1",
            )
        )
    except Exception as exc:  # noqa: BLE001 - the program opens its own, as without rankopt
        logger.debug("rankopt run: MASTER_PORT %d not opened early: %s", info.master_port, exc)


def _wait_count(store: Any, key: str, target: int, deadline: float) -> int:
    count = int(store.add(key, 0))
    delay = 0.001
    while count < target and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.005)
        count = int(store.add(key, 0))
    return count


def _init_gloo_on(store: Any, prefix: str, info: LaunchEnv, timeout: timedelta) -> None:
    """The default process group (Gloo) over the launcher's store, its keys under
    ``prefix``: one per step (probe, direction trial, verify), each destroyed after."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        store=dist.PrefixStore(prefix, store),
        rank=info.rank,
        world_size=info.world_size,
        timeout=timeout,
    )


def _probe(
    info: LaunchEnv,
    store: Any,
    timeout: timedelta,
    probe_options: Mapping[str, Any],
    *,
    progress: bool = False,
) -> Any:
    import torch.distributed as dist

    from rankopt._progress import Progress
    from rankopt.probe.torch import measure_at_root

    _init_gloo_on(store, "probe/", info, timeout)
    try:
        from rankopt.adapters.cache import probe_arguments

        shown = Progress("rankopt run", enabled=progress)
        m = measure_at_root(  # only rank 0 solves
            None, 0, **probe_arguments(probe_options), callback=shown.probe_callback()
        )
        shown.finish()
        return m
    finally:
        dist.destroy_process_group()


class _Matrix:
    def __init__(self, latency: NDArray[np.float64], hosts: tuple[str, ...]) -> None:
        self.latency = latency
        self.bandwidth = None
        self.hosts = hosts


def _solve(
    args: LaunchOptions, n: int, hosts: tuple[str, ...], measurement: Any
) -> tuple[NDArray[np.int64], str, Any, Any]:
    """Rank 0: the order to apply, a summary, and the network and result it came from."""
    if args.order is not None:
        from rankopt.adapters._common import check_binding, read_order_file

        order_file = read_order_file(args.order)
        check_binding(order_file, n, hosts, what="--order")
        order = as_order(order_file.order, n)
        if order[0] != 0:
            raise RankoptInputError(
                f"the order must keep rank 0 first (it hosts the rendezvous store); "
                f"order[0] is {order[0]}."
            )
        return order, f"order from {args.order}", None, None
    if args.latency is not None:
        from rankopt.network.io import load_matrix

        lat = load_matrix(args.latency)
        measurement = _Matrix(np.asarray(lat, dtype=np.float64), hosts)
    from rankopt.network.core import DDP_BUCKET_BYTES, Network

    opts: dict[str, Any] = {"engine": args.backend} if args.solve is None else dict(args.solve)
    granularity = args.granularity
    if granularity == "auto":
        from rankopt.engines import get

        granularity = get(args.backend).granularity
    if granularity == "node":
        from rankopt.adapters.nccl import solve_nodes

        lat = getattr(measurement, "latency", measurement)
        bw = getattr(measurement, "bandwidth", None)
        order, res = solve_nodes(
            lat, hosts, args.collective, args.algorithm, bandwidth=bw, keep_rank0=True, **opts
        )
        m = int(node_index(hosts).max()) + 1
        what = "nodes" if res is None else _describe(res)
        return order, f"node-granular, {m} nodes, {what}", None, res
    from rankopt._model_args import report
    from rankopt.solvers.solve import solve

    if isinstance(measurement, _Matrix):
        network = Network.from_matrices(measurement.latency, hosts=hosts, source="file")
    else:
        from rankopt.adapters.cache import network_of

        network = network_of(measurement)  # built once: the cache may have built it
    opts.setdefault("nbytes", DDP_BUCKET_BYTES)
    if isinstance(measurement, _Matrix):
        res = solve(network, args.collective, args.algorithm, keep_rank0=True, **opts)
    else:
        from rankopt.adapters.cache import solved_once

        spec = {"collective": args.collective, "algorithm": args.algorithm, **opts}
        res = solved_once(
            dict(args.probe).get("cache"),
            measurement,
            network,
            spec,
            lambda: solve(network, args.collective, args.algorithm, keep_rank0=True, **opts),
        )
        res.extra["probe_cache"] = measurement.parameters.get("cache")
    if args.json:
        from rankopt._model_args import write_json

        write_json(args.json, json.dumps(res.to_dict()))
    return as_order(res.order, n), report(res), network, res


def _describe(res: Any) -> str:
    try:
        return (
            f"{res.method}: cost {res.cost:.4g} s vs launch order {res.baseline_cost:.4g} s "
            f"(speedup {res.speedup:.3g}x)"
        )
    except Exception:  # noqa: BLE001
        return type(res).__name__


def launch(
    options: LaunchOptions | None = None,
    env: Mapping[str, str] | None = None,
) -> LaunchDecision:
    """Run steps 1-4 of the launcher in this process; collective over the job.

    Parameters
    ----------
    options : LaunchOptions, optional
        What to do (default: ``LaunchOptions()``, ``rankopt run`` with no flags).
    env : mapping, optional
        Environment (default ``os.environ``).

    Returns
    -------
    LaunchDecision

    Raises
    ------
    RankoptInputError
        Bad options or launcher environment (raised before any communication).
    LaunchError
        No order could be found (``on_error="fail"``), with the same message on
        every rank that is alive.
    """
    args = LaunchOptions() if options is None else options
    env = os.environ if env is None else env
    timeout_s = check_timeout(args.timeout, "--timeout")
    info = detect(env, master_addr=args.master_addr, master_port=args.master_port)
    timeout = timedelta(seconds=timeout_s)
    host = args.hostname or env.get("RANKOPT_HOSTNAME") or socket.gethostname()
    popts = dict(args.probe)
    n, rank = info.world_size, info.rank
    if n == 1:
        return LaunchDecision(0, 0, np.zeros(1, dtype=np.int64), (host,), "one process")
    resolve(info.master_addr, timeout_s, "--master-addr" if args.master_addr else "MASTER_ADDR")
    store, base = _open_store(info, args.probe_port, timeout)
    if args.program_store and rank == 0 and not info.agent_store:
        _open_program_store(info, timeout)
    try:
        store.set(f"host/{rank}", host)
        store.set(f"options/{rank}", json.dumps(option_digests(_shaping(args))))
        measurement = None
        if args.order is None and args.latency is None:
            try:
                measurement = _probe(
                    info, store, timeout, popts, progress=args.progress and rank == 0
                )
            except Exception as exc:  # noqa: BLE001 - published to rank 0
                store.set(f"failed/{rank}", f"{type(exc).__name__}: {exc}")
        store.add("probed", 1)
        if rank == 0:
            decision = _decide(args, store, n, measurement, time.monotonic() + args.timeout)
            store.set("decision", json.dumps(decision))
        measurement = None  # only rank 0 solves; no rank keeps the probe's n x n matrices
        decision = json.loads(store.get("decision"))
        # acknowledge before acting on it: rank 0 keeps the store up until all have read it
        store.add("ack", 1)
        if rank == 0:
            acked = _wait_count(store, "ack", n, time.monotonic() + args.timeout)
            if acked < n:
                logger.warning("rankopt run: only %d of %d ranks read the order", acked, n)
        if args.direction_trial and decision.get("trial") and not decision.get("error"):
            decision = _direction_trial(info, store, timeout, decision)
            if rank == 0 and args.save and _DEFERRED_SAVE:
                _save_after_trial(args.save, decision)
        if args.verify and not decision.get("error"):
            decision = _verified(info, store, timeout, decision, args)
    except (RankoptInputError, LaunchError):
        raise
    except Exception as exc:  # noqa: BLE001 - a store or connection failure
        raise LaunchError(
            f"lost contact with the temporary store at {info.master_addr} "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    finally:
        del store, base
    if decision.get("options_differ"):  # an input error on every rank, whatever --on-error
        raise RankoptInputError(decision["error"])
    if decision.get("error") and args.on_error == "fail":
        raise LaunchError(decision["error"])
    hosts = tuple(decision["hosts"])
    order = as_order(decision["order"], n)
    new_rank = int(np.flatnonzero(order == rank)[0])
    return LaunchDecision(
        rank, new_rank, order, hosts, decision.get("summary", ""), decision.get("error")
    )


def _verified(
    info: LaunchEnv, store: Any, timeout: timedelta, decision: dict[str, Any], args: LaunchOptions
) -> dict[str, Any]:
    """``--verify``: time the order against the launch order; keep it only if it wins.

    Collective over the job (a temporary Gloo group on the launcher's store);
    every rank gets the same timings (the slowest rank's) and so the same
    verdict. The table goes into the decision's summary, which the launcher
    prints on rank 0 unless ``--quiet``.
    """
    import torch.distributed as dist

    from rankopt.adapters.verify import verify_gloo

    order = [int(x) for x in decision["order"]]
    _init_gloo_on(store, "verify/", info, timeout)
    try:
        checked = verify_gloo(order, args.collective, timeout=timeout.total_seconds())
    finally:
        dist.destroy_process_group()
    summary = decision.get("summary", "") + "\n" + checked.table()
    if checked.applies:
        return {**decision, "summary": summary + "\nverified: applied"}
    return {
        **decision,
        "order": list(range(info.world_size)),
        "summary": summary + f"\nverified: {checked.verdict}: the launch order is kept",
    }


def _direction_trial(
    info: LaunchEnv, store: Any, timeout: timedelta, decision: dict[str, Any]
) -> dict[str, Any]:
    """The decision after :mod:`rankopt.adapters.direction`'s trial of its order
    against its groups the other way round. Collective over the job (a temporary
    Gloo group on the launcher's store, created with ``timeout``); every rank gets
    the same timings (the slowest rank's) and so the same choice."""
    import torch.distributed as dist

    from rankopt.adapters.direction import measure
    from rankopt.adapters.torch import ordered_group
    from rankopt.adapters.verify import GlooTimer

    trial = decision["trial"]
    n = info.world_size
    _init_gloo_on(store, "direction/", info, timeout)
    try:
        groups = [
            ordered_group(as_order(decision["order"], n), timeout=timeout, fallback=False),
            ordered_group(as_order(trial["alternative"], n), timeout=timeout, fallback=False),
        ]
        wins, line = measure(GlooTimer(groups, trial["collective"], n), trial)
    finally:
        dist.destroy_process_group()
    summary = decision.get("summary", "") + "\n" + line
    if wins:
        return {**decision, "order": list(trial["alternative"]), "summary": summary}
    return {**decision, "summary": summary}


#: Rank 0's network and result of an order whose ``--save`` waits for the trial.
_DEFERRED_SAVE: dict[str, Any] = {}


def _save_after_trial(path: str, decision: dict[str, Any]) -> None:
    """Rank 0: ``--save`` the order the trial chose, with what it was solved from."""
    from rankopt.adapters.direction import applied

    network = _DEFERRED_SAVE.pop("network", None)
    result = _DEFERRED_SAVE.pop("result", None)
    order = np.asarray(decision["order"], dtype=np.int64)
    trial = decision["trial"]
    if result is not None and not np.array_equal(order, result.order):
        line = decision.get("summary", "").splitlines()[-1]
        result = applied(result, order, float(trial["cost"]), line)
    save_order(path, order, what="--save", network=network, result=result)


#: LaunchOptions fields that do not shape the order: per-rank names and rank 0's outputs.
_PRIVATE_FIELDS = (
    "hostname",
    "save",
    "json",
    "timeout",
    "master_addr",
    "master_port",
    "probe_port",
    "progress",
    "program_store",
)


def _shaping(args: LaunchOptions) -> dict[str, Any]:
    """The options every rank must have been given alike."""
    return {f.name: getattr(args, f.name) for f in fields(args) if f.name not in _PRIVATE_FIELDS}


def _options_differ(store: Any, n: int) -> str | None:
    """The first option some rank was given differently from rank 0, as a message, or None."""
    if not store.check(["options/0"]):
        return None
    first = json.loads(store.get("options/0"))
    for r in range(1, n):
        if not store.check([f"options/{r}"]):  # every rank publishes before it counts as probed
            continue
        theirs = json.loads(store.get(f"options/{r}"))
        for key in sorted(set(first) | set(theirs)):
            a, b = first.get(key), theirs.get(key)
            if (a and a[0]) != (b and b[0]):
                flag = "--" + key.replace("_", "-")
                return (
                    f"option {flag} differs between ranks: launch rank 0 has "
                    f"{a[1] if a else 'none'}, launch rank {r} has {b[1] if b else 'none'}; "
                    "give every rank the same options."
                )
    return None


def _decide(
    args: LaunchOptions, store: Any, n: int, measurement: Any, deadline: float
) -> dict[str, Any]:
    probed = _wait_count(store, "probed", n, deadline)
    hosts: list[str] = []
    try:
        if probed < n:
            raise LaunchError(f"only {probed} of {n} ranks finished the probe in time")
        differ = _options_differ(store, n)
        if differ:
            return {
                "order": list(range(n)),
                "hosts": ["?"] * n,
                "summary": "launch order kept",
                "error": differ,
                "options_differ": True,
            }
        failed = [r for r in range(n) if store.check([f"failed/{r}"])]
        if failed:
            msg = store.get(f"failed/{failed[0]}").decode()
            raise LaunchError(
                f"probe failed on {len(failed)} rank(s), first rank {failed[0]}: {msg}"
            )
        hosts = [store.get(f"host/{r}").decode() for r in range(n)]
        from rankopt._progress import Progress

        shown = Progress("rankopt run", enabled=args.progress and args.order is None)
        shown.start(f"solve ({n} processes)", 0, "")
        order, summary, network, result = _solve(args, n, tuple(hosts), measurement)
        shown.finish("" if result is None else f"{result.method}, modelled {result.speedup:.3g}x")
        from rankopt.adapters.direction import plan

        trial = plan(result) if args.direction_trial and args.order is None else None
        if args.save and trial is None:
            save_order(args.save, order, what="--save", network=network, result=result)
        elif args.save:  # written once the trial has chosen (launch)
            _DEFERRED_SAVE.update(network=network, result=result)
        return {"order": order.tolist(), "hosts": hosts, "summary": summary, "trial": trial}
    except Exception as exc:  # noqa: BLE001 - every rank gets the same decision
        if not hosts:
            hosts = ["?"] * n
        return {
            "order": list(range(n)),
            "hosts": hosts,
            "summary": "launch order kept",
            "error": f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, LaunchError)
            else str(exc),
        }


def child_env(env: Mapping[str, str], info: LaunchEnv, decision: LaunchDecision) -> dict[str, str]:
    """Environment of the program: ``RANK`` renumbered, everything else kept.

    Sets ``RANK`` (and ``ROLE_RANK`` where it equalled ``RANK``), ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK`` only where the launcher did
    not set it, and ``RANKOPT_LAUNCH_RANK`` (the rank before reordering).

    Examples
    --------
    >>> from rankopt.adapters._env import detect
    >>> env = {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "MASTER_ADDR": "h",
    ...        "MASTER_PORT": "5"}
    >>> d = LaunchDecision(2, 1, np.array([0, 2, 1]), ("h", "h", "h"), "")
    >>> out = child_env(env, detect(env), d)
    >>> out["RANK"], out["LOCAL_RANK"], out["RANKOPT_LAUNCH_RANK"]
    ('1', '0', '2')
    """
    out = dict(env)
    if out.get("ROLE_RANK") == str(info.rank):
        out["ROLE_RANK"] = str(decision.new_rank)
    out["RANK"] = str(decision.new_rank)
    out["WORLD_SIZE"] = str(info.world_size)
    out["MASTER_ADDR"] = info.master_addr
    out["MASTER_PORT"] = str(info.master_port)
    if "LOCAL_RANK" not in out and info.local_rank is not None:
        out["LOCAL_RANK"] = str(info.local_rank)
    out["RANKOPT_LAUNCH_RANK"] = str(info.rank)
    return out
