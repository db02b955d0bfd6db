"""Measure the latency and bandwidth matrices of an MPI communicator (mpi4py).

Contents
--------
measure
    Run the probe collectively over ``comm``; the same
    :class:`~rankopt.probe.measurement.Measurement` is returned on every rank.

mpi4py is imported only when :func:`measure` is called.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._common import (
    ProbeParams,
    ProbeProgress,
    ProbeTimeoutError,
    check_root,
    check_topology,
    params_from,
    probe_hostname,
    root_call,
)
from rankopt.probe._engine import CONSENSUS_SHARE, run_with
from rankopt.probe.measurement import Measurement

__all__ = ["measure", "measure_at_root"]

_TAG_REPORT = 0x7A13


class _MPITransport:
    """Non-blocking mpi4py operations on a private duplicate of the communicator."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def isend(self, buf: NDArray[Any], peer: int, tag: int) -> Any:
        return self.comm.Isend(buf, dest=peer, tag=tag)

    def irecv(self, buf: NDArray[Any], peer: int, tag: int) -> Any:
        return self.comm.Irecv(buf, source=peer, tag=tag)

    def allreduce_max(self, send: NDArray[np.int64], recv: NDArray[np.int64]) -> Any:
        return self.comm.Iallreduce(send, recv, op=self.MPI.MAX)

    def allgather(self, send: NDArray[Any], recv: NDArray[Any]) -> Any:
        return self.comm.Iallgather(send, recv)

    def wait(self, handles: Sequence[Any], deadline: float, *, busy: bool) -> bool:
        testall = self.MPI.Request.Testall
        requests = list(handles)
        pause = 2e-5
        while not testall(requests):
            if time.perf_counter() >= deadline:
                return False
            if busy:  # a pair exchange: stay responsive, but let other processes run
                os.sched_yield()
            else:  # waiting for the others: sleep, leaving the cores to the pairs
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)
        return True

    def exchange_reports(self, key: str, report: int, deadline: float) -> list[int | None]:
        # MPI keeps the other links usable after a peer stops answering: point to point.
        n, me = self.size, self.rank
        mine = np.array([report], dtype=np.int64)
        theirs = np.full((n, 1), -2, dtype=np.int64)
        recvs = {q: self.irecv(theirs[q], q, _TAG_REPORT) for q in range(n) if q != me}
        sends = [self.isend(mine, q, _TAG_REPORT) for q in range(n) if q != me]
        while recvs and time.perf_counter() < deadline:
            recvs = {q: r for q, r in recvs.items() if not r.Test()}
            time.sleep(1e-3)
        recvs = {q: r for q, r in recvs.items() if not r.Test()}
        del sends  # sends to silent ranks may never complete; they are abandoned
        return [None if q in recvs or q == me else int(theirs[q, 0]) for q in range(n)]


def measure(
    comm: Any,
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
    """Measure latency and bandwidth between every pair of ranks of ``comm``.

    Collective: every rank of ``comm`` must call it with the same arguments.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The communicator to probe (at least 2 ranks). It is duplicated, so the
        probe's messages never mix with the application's.
    latency_bytes : int, default 8
        Size of a ping-pong message.
    bandwidth_bytes : int, default 1 MiB
        Size of a bandwidth transfer.
    repeats : int, default 10
        Timed ping-pongs started by each side of each pair.
    bandwidth_repeats : int, default 3
        Most timed transfers in each direction of each pair; a direction ends
        after two whose rates agree within 2%, or in the bandwidth phase after
        the first when it agrees as closely with a rate its sender already
        read there (the recheck always takes two).
    warmup : int, default 1
        Untimed ping-pongs and transfers before the timed ones.
    timeout : float, default 30.0
        Seconds allowed for one round (or bandwidth slot), consensus included.
        A rank that does not answer within it makes every rank raise
        :class:`ProbeTimeoutError` within ``timeout`` of the round's start.
    bandwidth : bool, default True
        Whether to measure bandwidth (the latency phase always runs).
    bw_concurrency : int, default 1
        How many transfers may share one suspected link in the bandwidth
        phase (see Notes). ``1`` measures each pair alone on its links.
    bandwidth_mode : {"auto", "all-pairs", "sampled", "linear"}, default "auto"
        ``"all-pairs"`` measures every pair (``n (n - 1) / 2`` transfers);
        ``"sampled"`` finds the groups the bandwidth shows with stars, then
        measures every pair inside a group and at least
        :data:`~rankopt.probe.schedule.BLOCK_SAMPLE_PAIRS` (8) pairs of each
        block between two groups (every host in one; a block whose rates
        differ twofold in full), filling the rest of a block from it (every
        pair where no groups show; see
        :class:`~rankopt.probe.schedule.SampledPlanner`);
        ``"linear"`` measures the hierarchy, its uplinks and representative
        pairs in ``O(hosts)`` slots and fills the other entries from the
        groups; see :mod:`rankopt.probe.linear`. Filled entries have
        ``bandwidth_counts`` 0. ``"auto"``: sampled up to
        :data:`~rankopt.probe._common.AUTO_ALL_PAIRS_MAX_HOSTS` (32) hosts,
        linear beyond. ``parameters["bandwidth_mode_run"]`` says which ran.
    uplink_flows : int, default 4
        Concurrent flows per uplink capacity test (linear mode).
    latency_mode : {"auto", "all-pairs", "linear"}, default "auto"
        ``"all-pairs"``: every pair in the ``n - 1`` rounds of the round
        robin. ``"linear"``: a few adaptive stages that measure each process
        against its host, the hosts against pivots of their groups and
        sampled pairs of every block, each process running its pairs without
        a barrier between them; the other entries are filled from their
        block (``pair_counts`` 0) and congested hosts are reported in
        ``parameters["congested_hosts"]``; see
        :mod:`rankopt.probe.linear_latency`. ``"auto"``: all-pairs up to
        :data:`~rankopt.probe._common.AUTO_LATENCY_ALL_PAIRS_MAX` (64)
        processes, linear beyond. ``parameters["latency_mode_run"]`` says
        which ran.
    callback : callable, optional
        Called on every rank after each round and slot with a
        :class:`~rankopt.probe.ProbeProgress`. An exception raised by it
        aborts the probe on that rank only (the others then time out).
    cache : callable, optional
        Runs the probe instead of the full one: a
        :class:`rankopt.adapters.cache.ProbeCache` keeps the probe for the next
        launch on the same hosts and reuses a kept one after a drift check
        (``parameters["cache"]`` says which happened). Default: the full probe.
    topology : TopologyLabels, optional
        The groups from the provider or the scheduler
        (:func:`rankopt.probe.topology_sources.read_topology`), the same on
        every rank: the bandwidth phase then discovers nothing -- it joins
        the hosts of every group and the groups (representatives) and tests
        the groups' uplinks (``bandwidth_mode="auto"`` runs this linear
        schedule at every size), and ``parameters["topology"]`` names the
        source. With ``cache``, a kept probe is reused only by a launch given the
        same topology.

    Returns
    -------
    Measurement
        Identical on every rank: latency (s), bandwidth (bytes/s) or None,
        spreads, host names, per-direction counts, timestamps, parameters.

    Raises
    ------
    RankoptInputError
        For invalid arguments (before any communication), a communicator with
        fewer than 2 ranks, or settings that differ between ranks.
    TypeError
        If ``comm`` is not an mpi4py intracommunicator.
    ProbeTimeoutError
        On every live rank, when a rank does not answer within ``timeout``.

    See Also
    --------
    rankopt.probe.torch.measure : the same over torch.distributed (Gloo).
    rankopt.probe.schedule.round_robin, rankopt.probe.schedule.bandwidth_slots

    Notes
    -----
    *Latency.* ``n - 1`` rounds (``n`` for odd ``n``) of the circle-method
    round robin run ``n // 2`` pairs at once. In each, both sides in turn
    start ``warmup + repeats`` ping-pongs of ``latency_bytes``; ``latency[i,
    j]`` is the median round-trip time of the ping-pongs started by ``i``,
    halved, and ``latency_spread`` its median absolute deviation. Small
    messages barely contend, so concurrency is harmless here. Each round
    lasts as long as its slowest pair, so beyond 64 processes the default
    runs the linear stages instead (``latency_mode``): about 7-11 stages,
    20-30 pairs per process, each process running its own pairs with no
    barrier between them (``rankopt probe --plan`` prints the stages).

    *Bandwidth.* Large concurrent transfers that cross one uplink share it,
    so this phase runs in slots in which no suspected link carries more than
    ``bw_concurrency`` transfers. Links are inferred from host names and
    from latency tiers (racks, pods); as latency may hide a hierarchy, the
    top-level groups (all hosts, when no tier shows) are assumed to share one
    core. See :func:`~rankopt.probe.schedule.bandwidth_slots`.
    ``bandwidth[i, j] = bandwidth_bytes / t``, ``t`` being the median time
    from sending to the acknowledgement minus the acknowledgement's latency.

    *Cost.* Latency: ``~n`` rounds of ``2 (warmup + repeats)`` round trips,
    ``n / 2`` pairs at a time. Bandwidth: ``S`` slots of at most
    ``2 (warmup + bandwidth_repeats)`` transfers. ``S = n (n - 1) / 2`` (one
    pair at a time) when every pair may share a link: on one host, or on a
    network whose latency shows no tiers. Pairs inside different racks or
    hosts run together, so with visible tiers ``S`` is about the number of
    pairs that cross the top level. The quadratic case is the price of an
    exact per-pair bandwidth; raise ``bw_concurrency`` (``n // 2`` gives the
    ``n - 1`` round-robin rounds on a network without shared links) or pass
    ``bandwidth=False`` for large ``n``; beyond 32 hosts the default
    (``bandwidth_mode="auto"``) runs the linear schedule: about
    ``3 H_d + G + 1.5 c`` slots (``H_d`` hosts in the largest latency domain,
    ``G`` groups, ``c`` latency groups; formula in :mod:`rankopt.probe.linear`),
    and ``rankopt probe --plan`` prints the schedule for a job. Each round or slot also costs one
    allreduce. On one 2-core machine 8 ranks take well under a second with
    the defaults.

    Examples
    --------
    Run with ``mpiexec -n 4 python script.py``:

    >>> from mpi4py import MPI                                 # doctest: +SKIP
    >>> from rankopt.probe.mpi import measure                  # doctest: +SKIP
    >>> m = measure(MPI.COMM_WORLD, timeout=10)                # doctest: +SKIP
    >>> m.latency.shape, m.pair_counts.sum()                   # doctest: +SKIP
    ((4, 4), 12)
    """
    params = params_from(locals())  # before anything else: no communication yet
    result = _measure(comm, params, callback, cache, None, check_topology(topology))
    assert result is not None  # every rank gets it without a root
    return result


def measure_at_root(comm: Any, root: int, **options: Any) -> Measurement | None:
    """:func:`measure`, for a caller that reads the result on rank ``root`` only.

    Collective, as :func:`measure`; the probe is the same. What the entry
    points call (only their root solves).

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        As in :func:`measure`.
    root : int
        The rank of ``comm`` that gets the result, the same on every rank.
    **options
        The keywords of :func:`measure` (``cache``, ``callback``, ...).

    Returns
    -------
    Measurement or None
        The measurement on ``root``, None on the other ranks. With root 0
        a cache hit (``cache=``) stays on rank 0, which reads the cache,
        rather than sending the kept ``n x n`` matrices to every rank (six
        of them, 805 MB at 4,096 processes).

    Raises
    ------
    RankoptInputError
        As :func:`measure`; also for a ``root`` outside ``comm`` (before
        any communication), or roots that differ between ranks (on every
        rank, when the probe goes through the cache).

    Examples
    --------
    Run with ``mpiexec -n 4 python script.py``:

    >>> from mpi4py import MPI                                 # doctest: +SKIP
    >>> from rankopt.probe.mpi import measure_at_root          # doctest: +SKIP
    >>> m = measure_at_root(MPI.COMM_WORLD, 0, timeout=10)     # doctest: +SKIP
    >>> m is None or m.latency.shape == (4, 4)                 # doctest: +SKIP
    True
    """
    params, callback, cache, topology = root_call(options)
    return _measure(comm, params, callback, cache, root, topology)


def _measure(
    comm: Any,
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
    from mpi4py import MPI

    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"`comm` must be an mpi4py intracommunicator; got {comm!r} instead.")
    if comm.Get_size() < 2:
        raise RankoptInputError(f"the probe needs at least 2 ranks; `comm` has {comm.Get_size()}.")
    root = check_root(root, comm.Get_size())
    private, request = comm.Idup()
    t0 = time.perf_counter()
    transport = _MPITransport(private)
    if not transport.wait([request], t0 + CONSENSUS_SHARE * params.timeout, busy=False):
        raise ProbeTimeoutError(
            f"probe timed out at the start (timeout {params.timeout:g} s): not every rank "
            "of the communicator joined.",
            phase="start",
            step=1,
        )
    try:
        hostname = probe_hostname(transport.rank)
        result = run_with(cache, transport, params, callback, "mpi", hostname, root, topology)
    except ProbeTimeoutError:
        raise  # the private communicator stays: freeing it would wait for the dead peer
    private.Free()
    return result
