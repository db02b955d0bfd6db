"""Measure the latency and bandwidth matrices of a torch.distributed process group (Gloo).

Contents
--------
measure
    Run the probe collectively over a process group; the same
    :class:`~rankopt.probe.measurement.Measurement` is returned on every rank.

torch is imported only when :func:`measure` is called.
"""

from __future__ import annotations

import datetime
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._common import (
    ProbeParams,
    ProbeProgress,
    check_root,
    check_topology,
    params_from,
    probe_hostname,
    root_call,
)
from rankopt.probe._engine import run_with
from rankopt.probe.measurement import Measurement

__all__ = ["measure", "measure_at_root"]


class _GlooTransport:
    """torch.distributed isend/irecv and async collectives on CPU tensors.

    A handle is ``(work, tensors)``: the tensors share memory with the NumPy
    buffers and stay referenced until the operation is waited for.
    """

    def __init__(self, dist: Any, torch: Any, group: Any) -> None:
        self.dist, self.torch, self.group = dist, torch, group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        world = group if group is not None else dist.group.WORLD
        self.peers = [dist.get_global_rank(world, q) for q in range(self.size)]
        try:  # the store that init_process_group rendezvoused through
            self.store = dist.distributed_c10d._get_default_store()
        except (AttributeError, RuntimeError, ValueError):
            self.store = None
        call = _CALLS[tuple(self.peers)] = _CALLS.get(tuple(self.peers), 0) + 1
        members = hex(zlib.crc32(repr(self.peers).encode()))
        self.prefix = f"rankopt/probe/{members}/{call}"

    def isend(self, buf: NDArray[Any], peer: int, tag: int) -> Any:
        t = self.torch.from_numpy(buf)
        return self.dist.isend(t, self.peers[peer], group=self.group, tag=tag), t

    def irecv(self, buf: NDArray[Any], peer: int, tag: int) -> Any:
        t = self.torch.from_numpy(buf)
        return self.dist.irecv(t, self.peers[peer], group=self.group, tag=tag), t

    def allreduce_max(self, send: NDArray[np.int64], recv: NDArray[np.int64]) -> Any:
        recv[...] = send
        t = self.torch.from_numpy(recv)
        op = self.dist.ReduceOp.MAX
        return self.dist.all_reduce(t, op=op, group=self.group, async_op=True), t

    def allgather(self, send: NDArray[Any], recv: NDArray[Any]) -> Any:
        outs = [self.torch.from_numpy(recv[q]) for q in range(self.size)]
        src = self.torch.from_numpy(send)
        return self.dist.all_gather(outs, src, group=self.group, async_op=True), (outs, src)

    def _wait_one(self, handle: Any, deadline: float) -> bool:
        if handle is None:
            return False
        # Gloo closes the link to a peer whose operation timed out: only time out for good.
        remaining = max(deadline - time.perf_counter(), 1e-3)
        try:
            handle[0].wait(timeout=datetime.timedelta(seconds=remaining))
        except RuntimeError:
            return False
        return True

    def wait(self, handles: Sequence[Any], deadline: float, *, busy: bool) -> bool:
        return all(self._wait_one(h, deadline) for h in handles)

    def exchange_reports(self, key: str, report: int, deadline: float) -> list[int | None]:
        # Gloo closes every link of a process once one of its operations times out, so
        # failure reports go through the rendezvous store instead.
        found: list[int | None] = [None] * self.size
        store = self.store
        if store is None:
            return found
        prefix = f"{self.prefix}/{key}/"
        try:
            store.set(prefix + str(self.rank), str(report))
        except RuntimeError:
            return found
        waiting = set(range(self.size)) - {self.rank}
        while True:
            for q in sorted(waiting):
                try:
                    if store.check([prefix + str(q)]):
                        found[q] = int(store.get(prefix + str(q)))
                        waiting.discard(q)
                except RuntimeError:
                    return found
            if not waiting or time.perf_counter() >= deadline:
                return found
            time.sleep(0.01)


_CALLS: dict[tuple[int, ...], int] = {}


def measure(
    group: Any = None,
    *,
    latency_bytes: int = 8,
    bandwidth_bytes: int = 1 << 20,
    repeats: int = 10,
    bandwidth_repeats: int = 3,
    warmup: int = 1,
    timeout: float = 30.0,
    bandwidth: bool = True,
    bw_concurrency: int = 1,
    bandwidth_mode: str = "auto",
    uplink_flows: int = 4,
    latency_mode: str = "auto",
    callback: Callable[[ProbeProgress], Any] | None = None,
    cache: Callable[..., Measurement] | None = None,
    topology: Any = None,
) -> Measurement:
    """Measure latency and bandwidth between every pair of ranks of a process group.

    Collective: every rank of ``group`` must call it with the same arguments,
    after ``torch.distributed.init_process_group``. Messages are CPU tensors
    sent with ``isend``/``irecv`` and waited for with ``Work.wait(timeout=...)``.

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        The group to probe (default: the world). Its backend must carry CPU
        tensors (Gloo, or a ``"cpu:gloo,cuda:nccl"`` combination).
    latency_bytes, bandwidth_bytes, repeats, bandwidth_repeats, warmup, timeout, bandwidth, \
bw_concurrency, bandwidth_mode, uplink_flows, latency_mode, callback, cache, topology
        As in :func:`rankopt.probe.mpi.measure`.

    Returns
    -------
    Measurement
        Identical on every rank; ``latency[i, j]`` indexes ranks of ``group``.

    Raises
    ------
    RankoptInputError
        For invalid arguments (before any communication), an uninitialised
        or NCCL-only group, a group of fewer than 2 ranks, or settings that
        differ between ranks.
    ProbeTimeoutError
        On every live rank, when a rank does not answer within ``timeout``.
        Gloo then still holds the unanswered operations: end the process
        (``os._exit``) rather than waiting in ``destroy_process_group``.

    See Also
    --------
    rankopt.probe.mpi.measure : the same over MPI, with the protocol and its cost.

    Notes
    -----
    Same protocol, schedule and cost as :func:`rankopt.probe.mpi.measure`;
    each message also pays the Python overhead of one ``isend``/``irecv``
    (tens of microseconds), which is part of the latency a Gloo collective
    sees.

    Examples
    --------
    Run with ``torchrun --nproc-per-node 4 script.py``:

    >>> import torch.distributed as dist                       # doctest: +SKIP
    >>> from rankopt.probe.torch import measure                # doctest: +SKIP
    >>> dist.init_process_group("gloo")                        # doctest: +SKIP
    >>> m = measure(timeout=10)                                # doctest: +SKIP
    >>> m.bandwidth.shape                                      # doctest: +SKIP
    (4, 4)
    """
    params = params_from(locals())  # before anything else: no communication yet
    result = _measure(group, params, callback, cache, None, check_topology(topology))
    assert result is not None  # every rank gets it without a root
    return result


def measure_at_root(group: Any, root: int, **options: Any) -> Measurement | None:
    """:func:`measure`, for a caller that reads the result on rank ``root`` of ``group`` only.

    As :func:`rankopt.probe.mpi.measure_at_root`: ``root`` is a rank of
    ``group`` (the same on every rank), ``options`` the keywords of
    :func:`measure`; the other ranks return None, and with root 0 a cache
    hit is not sent to them.
    """
    params, callback, cache, topology = root_call(options)
    return _measure(group, params, callback, cache, root, topology)


def _measure(
    group: Any,
    params: ProbeParams,
    callback: Callable[[ProbeProgress], Any] | None,
    cache: Callable[..., Measurement | None] | None,
    root: int | None,
    topology: Any = None,
) -> Measurement | None:
    if cache is not None and not callable(cache):
        raise RankoptInputError(
            f"`cache` must be a probe runner such as rankopt.adapters.cache.ProbeCache; "
            f"got {cache!r}."
        )
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RankoptInputError(
            "torch.distributed is not initialised; call init_process_group('gloo') first."
        )
    backend = str(dist.get_backend(group))
    if "gloo" not in backend and backend not in ("mpi",):
        raise RankoptInputError(
            f"the probe sends CPU tensors and needs a Gloo group; got backend {backend!r}."
        )
    transport = _GlooTransport(dist, torch, group)
    if transport.size < 2:
        raise RankoptInputError(
            f"the probe needs at least 2 ranks; the group has {transport.size}."
        )
    root = check_root(root, transport.size)
    hostname = probe_hostname(transport.rank)
    return run_with(cache, transport, params, callback, "gloo", hostname, root, topology)
