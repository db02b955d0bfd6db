"""``rankopt verify`` on real engines: MPI (mpi4py) and torch.distributed Gloo.

- :func:`verify_mpi` -- under mpiexec/srun: the launch order and the candidate
  as two communicators (``MPI_Comm_split``), the collective timed on each.
- :func:`verify_gloo` -- under torchrun (or any launcher that sets ``RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``): two Gloo groups.
- :class:`MPITimer`, :class:`GlooTimer` -- one timed call, the slowest rank's
  time on every rank (the protocol is :func:`rankopt.adapters.verify_stats.measure_orders`).

Deadlines. Nothing verify runs of its own waits for ever. Under MPI every
timed call is preceded by a non-blocking barrier waited for with the
deadline helpers of :mod:`rankopt.adapters.mpi` (a dead or stopped peer makes
every live rank raise :class:`~rankopt.adapters.mpi.RankoptMPIError` naming
the step, and the job ends with ``MPI_Abort`` at exit); the slowest-rank
reduction is non-blocking with the same deadline; the timed collective itself
is the blocking call the program runs (its non-blocking twin may run another
algorithm), guarded by a watchdog that aborts the job with a message if one
call outlives the deadline. Under Gloo every call runs on groups created with
``timeout``: Gloo raises on every rank when a peer is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rankopt._validation import RankoptInputError, check_order
from rankopt.adapters.mpi import TIMED_COLLECTIVES, MPITimer, _check_timed
from rankopt.adapters.verify_stats import (
    BLOCK,
    MIN_GAIN,
    VerifyResult,
    check_timing,
    default_sizes,
    launch_order_result,
    measure_orders,
    summarize,
)

__all__ = ["MPITimer", "GlooTimer", "verify_mpi", "verify_gloo", "check_mpi", "COLLECTIVES"]

logger = logging.getLogger("rankopt")

#: Collectives verify can time.
COLLECTIVES = TIMED_COLLECTIVES
DEFAULT_TIMEOUT = 60.0


class GlooTimer:
    """Time one torch.distributed collective on the launch or the candidate Gloo group."""

    def __init__(self, groups: Sequence[Any], collective: str, n: int) -> None:
        _check_timed(collective)
        self.groups = list(groups)
        self.collective = collective
        self.n = n
        self._buffers: dict[int, Any] = {}

    def _buffer(self, nbytes: int) -> Any:
        import torch

        if nbytes not in self._buffers:
            n = self.n
            count = max(nbytes // 4, 1)
            if self.collective in ("allgather", "alltoall"):
                count = max(count // n, 1) * n
            send = torch.ones(count // n if self.collective == "allgather" else count)
            recv = torch.empty(count)
            self._buffers = {nbytes: (send, recv)}
        return self._buffers[nbytes]

    def __call__(self, which: int, nbytes: int) -> float:
        import torch
        import torch.distributed as dist

        from rankopt.adapters.torch import run_collective

        group = self.groups[which]
        send, recv = self._buffer(nbytes)
        dist.barrier(group=group)
        t0 = time.perf_counter()
        run_collective(self.collective, send, recv, group)
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=group)
        return float(dt[0])


def _weights(workload: Any, sizes: Sequence[int]) -> list[float] | None:
    if not workload:
        return None
    count: dict[int, float] = {}
    for c in workload:
        count[int(c.nbytes)] = count.get(int(c.nbytes), 0.0) + float(c.count)
    return [count.get(int(s), 1.0) for s in sizes]


def _shown(enabled: bool, sizes: int) -> Any:
    from rankopt._progress import Progress

    shown = Progress("rankopt verify", enabled=enabled)
    shown.start("timing both orders", sizes, "sizes")
    return shown


def _rows(shown: Any) -> Any:
    from rankopt.adapters.verify_stats import size_row

    done = [0]

    def row(nbytes: int, a: list[float], b: list[float]) -> None:
        done[0] += 1
        shown.say(size_row(nbytes, a, b))
        shown.update(done[0])

    return row


def verify_mpi(
    comm: Any,
    order: ArrayLike | None = None,
    collective: str = "allreduce",
    *,
    sizes: Sequence[int] | None = None,
    repeats: int | None = None,
    budget_s: float = 10.0,
    timeout: float = DEFAULT_TIMEOUT,
    min_gain: float = MIN_GAIN,
    block: int = BLOCK,
    workload: Any = None,
    probe_options: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    progress: bool = False,
    **solve_options: Any,
) -> VerifyResult:
    """Time ``collective`` in the launch order and in ``order`` on ``comm``; collective.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The job's communicator (its numbering is the launch order).
    order : array_like of int, optional
        The candidate (``order[k]`` = rank in ``comm`` of new rank ``k``);
        without one, it is solved on the spot with the default path
        (:func:`rankopt.adapters.mpi.optimize` with ``probe_options`` and
        ``solve_options``).
    collective : str
        One of :data:`COLLECTIVES`.
    sizes : sequence of int, optional
        Bytes per call (default :func:`rankopt.adapters.verify_stats.default_sizes` of
        ``workload``).
    repeats, budget_s, block :
        See :func:`rankopt.adapters.verify_stats.measure_orders`.
    timeout : float
        Deadline of every step (see the module docstring).
    min_gain : float
        The smallest measured gain (a fraction) the verdict calls "apply"
        (:func:`rankopt.adapters.verify_stats.verdict`).
    workload : sequence of Call, optional
        Its sizes are the default sizes and its counts weight the overall
        verdict.
    progress : bool
        Rank 0 prints the probe's progress and a line per size as it is
        timed, on standard error (:class:`rankopt._progress.Progress`).

    Returns
    -------
    VerifyResult
        The same on every rank.
    """
    from rankopt.adapters.mpi import _dup, optimize, reorder

    _check_timed(collective)
    check_timing(sizes, repeats, budget_s, timeout, "verify_mpi()", min_gain=min_gain, block=block)
    n = comm.Get_size()
    info: dict[str, Any] = dict(extra or {})
    private = _dup(comm, timeout)
    if order is None:
        opts = dict(solve_options)
        if workload is not None:
            opts["workload"] = workload
        cand, result = optimize(
            private, collective, probe_options=probe_options, progress=progress, **opts
        )
        arr = check_order(result.order, n)
        info["source"] = "solved"
        info["modelled_speedup"] = float(result.speedup)
        info["modelled_interval"] = (
            None if result.speedup_interval is None else list(result.speedup_interval)
        )
        info["stop_reason"] = result.stop_reason
        info["result"] = result
    else:
        arr = check_order(order, n)
        cand = reorder(private, arr, name="rankopt_candidate")
        info.setdefault("source", "file")
    if order is None and np.array_equal(arr, np.arange(n)):  # the solve kept the launch order
        kept = info.pop("result", None)
        cand.Free()
        private.Free()
        out = launch_order_result(collective, n, "mpi", info)
        if kept is not None:
            out.extra["solve_result"] = kept.to_dict()
        return out
    launch = private.Split(0, key=private.Get_rank())
    sizes = list(sizes) if sizes else default_sizes(workload)
    timer = MPITimer([launch, cand], collective, timeout)
    shown = _shown(progress and comm.Get_rank() == 0, len(sizes))
    pairs = measure_orders(
        timer, sizes, repeats=repeats, budget_s=budget_s, block=block, callback=_rows(shown)
    )
    shown.finish()
    result_obj = info.pop("result", None)
    out = summarize(
        sizes,
        pairs,
        collective=collective,
        n=n,
        order=arr,
        engine="mpi",
        weights=_weights(workload, sizes),
        min_gain=min_gain,
        extra=info,
    )
    for c in (launch, cand, private):
        c.Free()
    if result_obj is not None:
        object.__setattr__(out, "extra", {**out.extra, "solve_result": result_obj.to_dict()})
    return out


def verify_gloo(
    order: ArrayLike | None = None,
    collective: str = "allreduce",
    *,
    sizes: Sequence[int] | None = None,
    repeats: int | None = None,
    budget_s: float = 10.0,
    timeout: float = DEFAULT_TIMEOUT,
    min_gain: float = MIN_GAIN,
    block: int = BLOCK,
    workload: Any = None,
    probe_options: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    progress: bool = False,
    **solve_options: Any,
) -> VerifyResult:
    """:func:`verify_mpi` for a torch.distributed job over Gloo (``env://`` rendezvous).

    Initialises the default process group (Gloo, ``timeout``) unless one is
    up; without ``order`` probes it (:func:`rankopt.probe.torch.measure`) and
    rank 0 solves with the default path (:func:`rankopt.solve` on the
    :class:`rankopt.Network`, engine ``gloo``) and broadcasts the order.
    """
    import torch.distributed as dist

    from rankopt.adapters.torch import ordered_group

    _check_timed(collective)
    check_timing(sizes, repeats, budget_s, timeout, "verify_gloo()", min_gain=min_gain, block=block)
    td = timedelta(seconds=timeout)
    own = not dist.is_initialized()
    if own:
        from rankopt.adapters._env import init_gloo

        init_gloo(timeout)
    try:
        n = dist.get_world_size()
        info: dict[str, Any] = dict(extra or {})
        mine = progress and dist.get_rank() == 0
        if order is None:
            arr, solved = _solve_gloo(
                n, collective, workload, probe_options, solve_options, progress=mine
            )
            info.update(solved)
        else:
            arr = check_order(order, n)
            info.setdefault("source", "file")
        if order is None and np.array_equal(arr, np.arange(n)):  # the solve kept it
            return launch_order_result(collective, n, "gloo", info)
        launch = dist.new_group(ranks=list(range(n)), timeout=td)
        cand = ordered_group(arr, timeout=td, fallback=False)
        sizes = list(sizes) if sizes else default_sizes(workload)
        timer = GlooTimer([launch, cand], collective, n)
        shown = _shown(mine, len(sizes))
        pairs = measure_orders(
            timer, sizes, repeats=repeats, budget_s=budget_s, block=block, callback=_rows(shown)
        )
        shown.finish()
        return summarize(
            sizes,
            pairs,
            collective=collective,
            n=n,
            order=arr,
            engine="gloo",
            weights=_weights(workload, sizes),
            min_gain=min_gain,
            extra=info,
        )
    finally:
        if own:
            dist.destroy_process_group()


def _solve_gloo(
    n: int,
    collective: str,
    workload: Any,
    probe_options: Mapping[str, Any] | None,
    solve_options: Mapping[str, Any],
    *,
    progress: bool = False,
) -> tuple[Any, dict[str, Any]]:
    import torch.distributed as dist

    from rankopt._progress import Progress
    from rankopt.adapters.cache import network_of, probe_arguments
    from rankopt.probe.torch import measure_at_root
    from rankopt.solvers.solve import solve

    shown = Progress("rankopt", enabled=progress)
    m = measure_at_root(  # only rank 0 solves
        None, 0, **probe_arguments(probe_options), callback=shown.probe_callback()
    )
    shown.finish()
    payload: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            opts = dict(solve_options)
            if workload is not None:
                opts["workload"] = workload
            assert m is not None  # rank 0 is the probe's root
            res = solve(network_of(m), collective, **opts)
            payload[0] = (
                "ok",
                res.order.tolist(),
                {
                    "source": "solved",
                    "modelled_speedup": float(res.speedup),
                    "modelled_interval": None
                    if res.speedup_interval is None
                    else list(res.speedup_interval),
                    "stop_reason": res.stop_reason,
                    "solve_result": res.to_dict(),
                },
            )
        except Exception as exc:  # noqa: BLE001 - every rank raises the same
            payload[0] = ("error", f"{type(exc).__name__}: {exc}", {})
    dist.broadcast_object_list(payload, src=0)
    status, value, info = payload[0]
    if status != "ok":
        raise RankoptInputError(f"verify: the solve failed on rank 0: {value}")
    return check_order(value, n), info


def check_mpi(
    comm: Any,
    stored: Any,
    order: ArrayLike | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    repeats: int = 3,
    max_pairs: int = 24,
    probe_options: Mapping[str, Any] | None = None,
    solve_options: Mapping[str, Any] | None = None,
) -> Any:
    """Re-probe ``comm`` cheaply and compare with ``stored`` (:func:`rankopt.adapters.drift.compare`).

    Collective. All-pairs latency (``rankopt.probe.mpi.measure`` without
    bandwidth), then the bandwidth of the pairs :func:`rankopt.adapters.drift.choose_pairs`
    picks, one pair at a time (each alone on the network, as the stored
    entries mean), ``repeats`` transfers each of about 0.1 s at the stored
    rate. Every step has the deadline ``timeout``. Returns the
    :class:`~rankopt.adapters.drift.CheckResult`, the same on every rank.
    """
    from mpi4py import MPI

    from rankopt.adapters.drift import choose_pairs, compare
    from rankopt.adapters.mpi import RankoptMPIError, _abort_at_exit, _dup, _wait
    from rankopt.probe._common import transfer_seconds
    from rankopt.probe.mpi import measure

    n = comm.Get_size()
    if stored.n != n:
        raise RankoptInputError(
            f"the stored network has {stored.n} processes; this job has {n}: re-probe instead."
        )
    private = _dup(comm, timeout)
    opts = {"bandwidth": False, "repeats": 5, "timeout": timeout, **dict(probe_options or {})}
    opts.pop("cache", None)  # the check re-probes: it compares with what is stored
    m = measure(private, **opts)
    pairs = choose_pairs(stored, max_pairs=max_pairs) if stored.bandwidth is not None else []
    me = private.Get_rank()
    rates = np.zeros(len(pairs))

    def step(requests: list[Any], what: str, busy: bool = False) -> None:
        if not _wait(requests, MPI.Wtime() + timeout, busy=busy):
            _abort_at_exit()
            raise RankoptMPIError(f"check: {what} did not complete within {timeout:g} s.")

    # measured as the probe measures: a warm-up, then the transfer and its small
    # acknowledgement, tested busily, the acknowledgement's latency taken off
    for k, (i, j) in enumerate(pairs):
        nbytes = int(np.clip(0.1 * float(stored.bandwidth[i, j]), 1 << 18, 8 << 20))
        step([private.Ibarrier()], "the barrier before a bandwidth sample")
        if me not in (i, j):
            continue
        buf = np.zeros(nbytes, dtype=np.uint8)
        ack = np.zeros(1, dtype=np.uint8)
        times = []
        for r in range(repeats + 1):
            if me == i:
                back = private.Irecv(ack, source=j, tag=0x7C02)
                t0 = MPI.Wtime()
                sent = private.Isend(buf, dest=j, tag=0x7C01)
                step([sent, back], "a bandwidth sample", busy=True)
                if r:
                    times.append(MPI.Wtime() - t0)
            else:
                step([private.Irecv(buf, source=i, tag=0x7C01)], "a bandwidth sample", True)
                step([private.Isend(ack, dest=i, tag=0x7C02)], "a bandwidth sample", True)
        if me == i:
            elapsed = float(np.median(times))
            rates[k] = nbytes / transfer_seconds(elapsed, float(m.latency[j, i]))
    total = np.zeros_like(rates)
    step([private.Iallreduce(rates, total, op=MPI.SUM)], "sharing the bandwidth samples")
    private.Free()
    samples = {p: float(r) for p, r in zip(pairs, total, strict=True)}
    return compare(
        stored,
        m.latency,
        samples,
        order=order,
        latency_spread=getattr(m, "latency_spread", None),
        solve_options=solve_options,
    )
