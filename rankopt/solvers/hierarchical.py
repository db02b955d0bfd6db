"""The ring solve of a :class:`~rankopt.network.hierarchical.HierarchicalNetwork`.

``solve(network)`` on a hierarchical network runs :func:`solve_hierarchical`:
the host ring is solved on a host-level matrix with the ring solvers, each
host's ranks are kept contiguous, and the order is priced with
:func:`rankopt.network.hierarchical.ring_cost`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._rng import normalize_rng
from rankopt._validation import RankoptInputError, check_options
from rankopt.network.hierarchical import (
    RING_COLLECTIVES,
    HierarchicalNetwork,
    _objective,
    ring_cost,
)
from rankopt.order import identity, invert
from rankopt.solvers.result import SolveResult
from rankopt.solvers.ring import SEED_POWER

__all__ = ["solve_hierarchical", "CROSSING_PENALTY"]

#: The host-ring search prices a ring edge that leaves a group of a level
#: above the hosts at this many times the largest edge time more per level
#: crossed, so that it keeps racks and pods contiguous; the ring is then made
#: contiguous at every level exactly (:func:`_make_contiguous`).
CROSSING_PENALTY = 4.0


def _host_weights(
    net: HierarchicalNetwork, obj: str, size: float | None, frac: float
) -> NDArray[Any]:
    """The host-level matrix the host ring is solved on (sum of its edges).

    ``sum``/``bottleneck``: the host latency itself (no copy). ``time`` and
    ``contention``: the edge time of one ring step, ``latency + frac * nbytes
    / bandwidth``, in the latency's dtype; for ``contention`` each level above
    the hosts a pair crosses adds :data:`CROSSING_PENALTY` times the largest
    edge time. Built in blocks of rows: one (H, H) array.
    """
    lat = net.latency
    if obj in ("sum", "bottleneck") or size is None or net.bandwidth is None and obj == "time":
        return lat
    h = net.n_hosts
    w = np.empty_like(lat)
    block = max(1, (1 << 24) // h)
    for i in range(0, h, block):
        rows = slice(i, min(i + block, h))
        if net.bandwidth is not None:
            with np.errstate(divide="ignore"):  # the zero diagonal, reset below
                np.divide(frac * size, net.bandwidth[rows], out=w[rows])
            w[rows] += lat[rows]
        else:
            w[rows] = lat[rows]
    np.fill_diagonal(w, 0.0)
    if obj == "contention" and net.groups:
        pen = w.dtype.type(CROSSING_PENALTY * float(w.max()))
        for i in range(0, h, block):
            rows = slice(i, min(i + block, h))
            for lab in net.groups:
                w[rows] += pen * (lab[rows, None] != lab[None, :])
    return w


def _make_contiguous(ring: NDArray[np.int64], groups: Sequence[NDArray[np.int64]]) -> Any:
    """The host ring with every group of every level made one run, order otherwise kept.

    The ring is rotated to start where its top-level group changes; hosts are
    then stably sorted by the first position of their group at each level,
    coarsest first.
    """
    if not groups:
        return ring
    top = groups[-1][ring]
    change = np.flatnonzero(top != np.roll(top, 1))
    if change.size:
        ring = np.roll(ring, -int(change[0]))
    pos = np.arange(ring.size, dtype=np.int64)
    keys = [pos]
    for lab in groups:
        lr = lab[ring]
        first = np.full(int(lab.max()) + 1, ring.size, dtype=np.int64)
        np.minimum.at(first, lr, pos)
        keys.append(first[lr])
    return ring[np.lexsort(keys)]


def _expand(net: HierarchicalNetwork, host_ring: NDArray[np.int64]) -> NDArray[np.int64]:
    """The rank order that visits the hosts in ``host_ring``, each host's ranks in launch order."""
    pos = np.empty(net.n_hosts, dtype=np.int64)
    pos[host_ring] = np.arange(net.n_hosts, dtype=np.int64)
    return np.asarray(
        np.lexsort((np.arange(net.n, dtype=np.int64), pos[net.host_of])), dtype=np.int64
    )


def solve_hierarchical(
    network: HierarchicalNetwork,
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    host_solve: Callable[..., SolveResult],
    objective: str | None = None,
    nbytes: float | None = None,
    method: str = "auto",
    rng: None | int | np.random.Generator = 0,
    time_limit: float | None = None,
    max_iter: int | None = None,
    keep_rank0: bool = False,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> SolveResult:
    """The ring order of a :class:`HierarchicalNetwork` (what ``solve(network)`` runs).

    Parameters
    ----------
    network : HierarchicalNetwork
    collective : {"allreduce", "allgather", "reduce_scatter"}
    algorithm : {"ring"}
    host_solve : callable
        The matrix ``solve()`` the host ring is solved with
        (:func:`rankopt.solvers.solve.solve` passes itself, so this module
        does not import it back).
    objective : {"sum", "bottleneck", "time", "contention"}, optional
        Default :meth:`HierarchicalNetwork.default_model`.
    nbytes : float, optional
        Message size (default 16 MiB for ``time``/``contention``).
    method, rng, time_limit, max_iter, callback, options
        Passed to the host-ring ``host_solve`` (a ring ``sum`` or
        ``bottleneck`` over the hosts).
    keep_rank0 : bool
        ``order[0] == 0`` (free: the ring is rotation invariant).

    Returns
    -------
    SolveResult
        ``order`` over the ranks; ``extra["hierarchical"]`` records the host
        solve and the cost of the hierarchy-contiguous order
        (``contiguous_cost``, ``quality_vs_contiguous`` = its cost over
        ours, at least 1).

    Notes
    -----
    1. The host ring is solved with ``host_solve`` on an (H, H) host
       matrix (:func:`_host_weights`): the host latency for ``sum`` and
       ``bottleneck``; the edge time of one ring step for ``time``; for
       ``contention`` that time plus a penalty per group boundary crossed,
       and the ring then made contiguous at every level
       (:func:`_make_contiguous`), so every uplink carries one ring edge per
       direction, the fewest possible. For ``time`` and ``contention`` it is
       solved a second time on that matrix (scaled to at most 1) to the power
       :data:`rankopt.solvers.ring.SEED_POWER`, whose sum the slowest edges
       dominate, as a ring step's time is its slowest transfer's; under
       ``contention`` that ring is also priced as found, where a rack crossed
       twice may cost less than the best exits of one crossing (48 processes in
       racks of 4 hosts: 0.0751 against 0.0886 s).
    2. Every host's ranks follow each other in launch order (intra-host edges
       are the cheapest; a host's uplink is crossed once).
    3. The result is the best of that order, the hierarchy-contiguous order
       (:meth:`HierarchicalNetwork.contiguous_order`) and the launch order,
       priced by :func:`ring_cost`: never worse than either.

    Time: the host solve (twice for ``time`` and ``contention``: the ring
    solvers' cost at n = H) plus
    :math:`O(n \\log n)`; memory: the host matrices, one more (H, H) matrix
    for ``time``/``contention``, and :math:`O(n)`.
    """
    t0 = time.perf_counter()
    if algorithm != "ring":
        raise RankoptInputError(
            f"a HierarchicalNetwork is solved for ring algorithms; got algorithm={algorithm!r}."
        )
    check_options("collective", collective, RING_COLLECTIVES)
    obj, size = _objective(network, objective, nbytes)
    gen, seed = normalize_rng(rng)
    n, h = network.n, network.n_hosts
    notes: list[str] = []
    t_host = time.perf_counter()
    host_obj = "bottleneck" if obj == "bottleneck" else "sum"
    w = _host_weights(network, obj, size, 1.0 / n)
    kw = dict(
        objective=host_obj,
        method=method,
        rng=gen,
        time_limit=time_limit,
        max_iter=max_iter,
        callback=callback,
        options=options,
    )
    host = host_solve(w, **kw)
    rings = {"solved": np.asarray(host.order, dtype=np.int64)}
    if obj in ("time", "contention") and w is not network.latency:
        # a ring step lasts as long as its slowest transfer: the host ring also on the
        # edge times to the power SEED_POWER, whose sum the largest edges dominate
        top = float(np.max(w))
        if np.isfinite(top) and top > 0:
            w /= top
            w **= SEED_POWER
            rings["solved, slowest edges first"] = np.asarray(
                host_solve(w, **kw).order, dtype=np.int64
            )
    del w
    if obj == "contention":
        raw = rings.get("solved, slowest edges first")
        rings = {k: _make_contiguous(r, network.groups) for k, r in rings.items()}
        if raw is not None:
            # a group crossed twice may still price lower: the ring as that search found it
            rings["solved, slowest edges first, as found"] = raw
    host_s = time.perf_counter() - t_host
    candidates = {k: _expand(network, r) for k, r in rings.items()}
    candidates.update(contiguous=network.contiguous_order(), launch=identity(n))
    costs = {
        k: ring_cost(network, o, collective, objective=obj, nbytes=size)
        for k, o in candidates.items()
    }
    best = min(costs, key=lambda k: (costs[k], not k.startswith("solved")))
    order, cost = candidates[best], costs[best]
    if not best.startswith("solved"):
        notes.append(
            f"the {best} order prices no higher than the solved host ring "
            f"({costs[best]:.6g} <= {costs['solved']:.6g} s): it is returned"
        )
    if keep_rank0 and order[0] != 0:
        order = np.roll(order, -int(np.flatnonzero(order == 0)[0]))
    baseline = costs["launch"]
    stop = (
        host.stop_reason
        if best.startswith("solved")
        else {"launch": "launch_order_kept"}.get(best, "contiguous_order_kept")
    )
    return SolveResult(
        order=order,
        rank_of=invert(order),
        cost=float(cost),
        baseline_cost=float(baseline),
        speedup=float(baseline / cost) if cost > 0 else 1.0,
        method=f"hierarchical+{host.method}",
        objective=obj,
        collective=collective,
        algorithm="ring",
        iterations=host.iterations,
        evaluations=host.evaluations + len(candidates),
        runtime_s=time.perf_counter() - t0,
        stop_reason=stop,
        seed=seed,
        history=host.history,
        extra={
            "hierarchical": {
                "hosts": h,
                "host_objective": host_obj,
                "host_method": host.method,
                "host_solve_s": host_s,
                "solved_cost": costs["solved"],
                "contiguous_cost": costs["contiguous"],
                "quality_vs_contiguous": costs["contiguous"] / cost if cost > 0 else 1.0,
                "kept": best,
            }
        },
        nbytes=None if size is None or obj in ("sum", "bottleneck") else float(size),
        network={
            "n": n,
            "source": network.source,
            "hosts": None if network.hosts is None else list(network.hosts),
            "level_sizes": network.level_sizes(),
            "uplinks": [[float(x) for x in u] for u in network.uplinks],
            "has_bandwidth": network.bandwidth is not None,
            "hierarchy": "given",
        },
        notes=tuple(notes),
    )
