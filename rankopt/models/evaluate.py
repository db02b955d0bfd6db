"""``rankopt.cost``: modelled seconds of one collective under one rank order."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rankopt._validation import RankoptInputError, check_matrix, check_order

__all__ = ["cost"]


def cost(
    latency: ArrayLike,
    order: ArrayLike,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    bandwidth: ArrayLike | float | None = None,
    nbytes: float | None = None,
    groups: Any = None,
    uplink_bandwidth: Any = None,
    objective: str | None = None,
    segment_size: float | None = None,
    inter: str | None = None,
    straggle: float | None = None,
    elastic: float | None = None,
    workload: Any = None,
    engine: str | None = None,
) -> float:
    """Modelled time in seconds of ``collective``/``algorithm`` under ``order``.

    Parameters
    ----------
    latency : array_like (n, n), Network, Measurement, Cloud or path to a .npz
        One-way latency in seconds between original ranks; or a whole
        network, priced as :func:`solve` prices it: what the keywords leave
        out (objective, bandwidth, message size, groups, uplinks, straggle,
        elastic) is the network's (:meth:`rankopt.Network.default_model`),
        the nominal model (not the robust objective ``solve`` may minimise).
    order : array_like of int (n,)
        ``order[k]`` is the original rank given new rank ``k``.
    collective, algorithm : str
        See :data:`rankopt.models.ALGORITHMS`.
    bandwidth : float or array_like (n, n), optional
        Pair bandwidth in bytes/s; ``None`` gives a latency-only model.
    nbytes : float
        Size of each rank's full result buffer in bytes (allreduce: the
        vector; allgather: the gathered output; reduce_scatter: the input
        vector; broadcast/reduce: the message; alltoall: each rank's whole
        send buffer). Required with ``bandwidth`` or ``uplink_bandwidth``.
    groups : array_like of int (n,) or list of them, optional
        Group of each process per level, finest first (host, rack, pod).
    uplink_bandwidth : float or sequence, optional
        Capacity of each group's uplink (bytes/s): one number for all
        levels, or one entry per level: a number, one rate per group in the
        order of the sorted labels (both directions), or a ``(2, G)`` array
        of the rates out of (row 0) and into (row 1) every group.
    objective : str, optional
        Default: the rule :func:`solve` follows,
        :func:`rankopt.models.default_objective` with the same arguments
        (``"contention"`` with groups, uplinks and ``nbytes``; ``"sum"`` for a
        ring without both bandwidth and ``nbytes``; else ``"time"``), so that
        ``cost(latency, solve(latency, ...).order, ...) == solve(...).cost``.
        ``"sum"`` / ``"bottleneck"`` give the latency-only ring objectives
        (bandwidth and uplinks are then not used).
    segment_size : float, optional
        Segment size of the pipelined chain broadcast.
    inter : {"rings", "leaders"}, optional
        Inter-group phase of the hierarchical allreduce.
    straggle : float, optional
        With uplinks: ``K`` transfers of a step from one group into one
        group each get ``uplink / K**straggle``; a transfer crowded at its
        two ends by ``K_out`` and ``K_in`` transfers, with ``c = min(K_out,
        K_in)``, gets ``uplink / (K_out * c**(straggle - 1))`` out and the
        like in (default 1, an even split; a probe measures it,
        :attr:`rankopt.Network.straggle`).
    elastic : float, optional
        With uplinks: how much of another tenant's load on an uplink yields
        to more transfers, 0 (default: none) to 1 (all, as TCP flows do; see
        :func:`rankopt.models.network.tenant_flows`; a probe measures it,
        :attr:`rankopt.Network.elastic`).
    workload : sequence or path, optional
        The job's mix of calls (:func:`rankopt.models.workload.as_workload`):
        the time of all of them, each priced with ``algorithm`` (on a
        collective without a ring, its ring pattern) or, with ``engine``,
        with the algorithm that engine runs at the call's size, as
        :func:`solve` prices it. ``nbytes`` is then not needed.
    engine : str, optional
        ``"openmpi"``, ``"mpich"``, ``"gloo"`` or ``"nccl"``: price the call
        (``collective`` at ``nbytes``, or each of ``workload``) with the
        algorithm the engine runs, in place of ``algorithm``.

    Returns
    -------
    float
        Seconds.

    Notes
    -----
    α-β, step-synchronous: a step lasts as long as its slowest transfer
    ``latency[a, b] + bytes / rate``; the total is the sum over steps. With
    uplinks, the K transfers of a step that leave (enter) a group share its
    uplink: each gets at most ``uplink / K`` (``uplink / K**straggle`` for K
    transfers from one group into one group; see
    :func:`rankopt.models.network.reference_time`).

    The model of the last call is kept, keyed by a digest of every input
    but the order: pricing many orders on one network builds it once.

    Examples
    --------
    Ring allreduce on a uniform network: ``2(p-1) a + 2(p-1)/p n/B``.

    >>> import numpy as np, rankopt
    >>> lat = np.full((4, 4), 1e-5)
    >>> t = rankopt.cost(lat, [0, 1, 2, 3], "allreduce", "ring", bandwidth=1e9, nbytes=4e6)
    >>> bool(np.isclose(t, 6 * 1e-5 + 1.5 * 4e6 / 1e9))
    True

    Two racks with 1 GB/s uplinks: an interleaved ring puts 4 flows on each
    uplink direction, a rack-contiguous one 1.

    >>> rack = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    >>> lat = np.full((8, 8), 1e-5)
    >>> kw = dict(bandwidth=10e9, nbytes=1e8, groups=rack, uplink_bandwidth=1e9)
    >>> a = rankopt.cost(lat, [0, 4, 1, 5, 2, 6, 3, 7], **kw)
    >>> b = rankopt.cost(lat, [0, 1, 2, 3, 4, 5, 6, 7], **kw)
    >>> round(a / b, 2)
    3.99
    """
    from rankopt.models.factory import RING_OBJECTIVES, make_model, network_inputs
    from rankopt.network.core import as_network
    from rankopt.network.hierarchical import HierarchicalNetwork

    if isinstance(latency, HierarchicalNetwork):  # rings only, priced level by level
        others = {"bandwidth": bandwidth, "groups": groups, "uplink_bandwidth": uplink_bandwidth,
                  "segment_size": segment_size, "inter": inter, "straggle": straggle,
                  "elastic": elastic, "workload": workload, "engine": engine}  # fmt: skip
        given = sorted(k for k, v in others.items() if v is not None)
        if algorithm != "ring" or given:
            raise RankoptInputError(
                "a HierarchicalNetwork prices rings from its own levels "
                "(HierarchicalNetwork.cost); got "
                + (f"algorithm={algorithm!r}" if algorithm != "ring" else f"`{given[0]}`")
                + "."
            )
        return float(latency.cost(order, collective, objective=objective, nbytes=nbytes))
    network = as_network(latency)
    if network is not None:  # what the keywords leave out is the network's, as in solve()
        net_kw, _ = network_inputs(
            network,
            algorithm,
            objective=objective,
            nbytes=nbytes,
            bandwidth=bandwidth,
            groups=groups,
            uplink_bandwidth=uplink_bandwidth,
            straggle=straggle,
        )
        latency = network.latency
        if (workload is not None or engine is not None) and objective is None:
            if net_kw["objective"] in RING_OBJECTIVES:
                net_kw["objective"] = None  # latency only: the α-β time of every call
        objective, bandwidth, nbytes = net_kw["objective"], net_kw["bandwidth"], net_kw["nbytes"]
        groups, uplink_bandwidth = net_kw["groups"], net_kw["uplink_bandwidth"]
        straggle = net_kw["straggle"]
        elastic = net_kw["elastic"] if elastic is None else elastic
    lat = check_matrix(latency, "latency")
    o = check_order(order, lat.shape[0])
    priced = None
    if workload is not None or engine is not None:  # the calls priced as solve() prices them
        if engine is not None and algorithm != "ring":
            raise RankoptInputError(
                f"`engine` decides each call's algorithm; got algorithm={algorithm!r} as well."
            )
        from rankopt.models.workload import as_workload, price_job

        calls = None if workload is None else as_workload(workload)
        nodes = None if network is None or network.hosts is None else list(network.hosts)
        priced, collective, algorithm, nbytes = price_job(
            lat.shape[0], collective, algorithm, nbytes, calls, engine, nodes=nodes
        )
    if (
        (bandwidth is not None or uplink_bandwidth is not None)
        and nbytes is None
        and priced is None
        and objective not in ("sum", "bottleneck")
    ):
        raise RankoptInputError(
            "`nbytes` is required with `bandwidth` or `uplink_bandwidth` (the message size in "
            "bytes); pass bandwidth=None for a latency-only model."
        )
    kw = {
        "objective": objective,
        "bandwidth": bandwidth,
        "nbytes": nbytes,
        "groups": groups,
        "uplink_bandwidth": uplink_bandwidth,
        "segment_size": segment_size,
        "inter": inter,
        "straggle": straggle,
        "elastic": elastic,
    }
    if priced is not None:
        kw["workload"] = priced
    key = _digest(lat, collective, algorithm, kw)
    with _LOCK:
        cached = _LAST.get(key) if key is not None else None
    if cached is None:
        # objective=None: make_model applies default_objective, the rule solve() follows
        cached = make_model(lat, collective, algorithm, **kw)
        if key is not None:
            with _LOCK:
                _LAST.clear()
                _LAST[key] = cached
    return float(cached.cost(np.ascontiguousarray(o, dtype=np.int64)))


#: The model of the last :func:`cost` call, by the digest of its inputs.
_LAST: dict[str, Any] = {}
_LOCK = threading.Lock()


def _digest(lat: np.ndarray, collective: str, algorithm: str, kw: dict[str, Any]) -> str | None:
    """A digest of the model's inputs (contents, not identities), or None if one is opaque."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((str(collective), str(algorithm), lat.shape, str(lat.dtype))).encode())
    h.update(np.ascontiguousarray(lat).tobytes())
    for name in sorted(kw):
        h.update(name.encode())
        if not _feed(h, kw[name]):
            return None
    return h.hexdigest()


def _feed(h: Any, value: Any) -> bool:
    """Add ``value`` to the digest; False for what has no stable content (a custom object)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        h.update(repr((type(value).__name__, value)).encode())
        return True
    if isinstance(value, (list, tuple)):
        h.update(f"seq{len(value)}".encode())
        return all(_feed(h, v) for v in value)
    if isinstance(value, dict):
        h.update(f"map{len(value)}".encode())
        return all(_feed(h, str(k)) and _feed(h, value[k]) for k in sorted(value, key=str))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a priced call
        h.update(type(value).__name__.encode())
        return all(_feed(h, getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype == object:
            return False
        h.update(repr((arr.shape, str(arr.dtype))).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
        return True
    return False
