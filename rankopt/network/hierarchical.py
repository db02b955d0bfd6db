"""Hierarchical networks for very large jobs: no (n, n) matrix over the ranks.

A job of 131,072 ranks on 16,384 hosts (8 per host) would need a 137 GB
float64 rank matrix; what its network says fits in a host-level matrix plus
the host of every rank. This module holds that form and its ring cost; its ring solve is
:func:`rankopt.solvers.hierarchical.solve_hierarchical`.

Contents
--------
HierarchicalNetwork
    The host of every process, host-level latency (and bandwidth) matrices,
    the groups above the hosts (racks, pods) per level and every group's
    uplink capacity. :func:`rankopt.solve` accepts it.
ring_cost
    A ring order's modelled cost (``sum``, ``bottleneck``, ``time``,
    ``contention``) in :math:`O(n \\cdot \\text{levels})` from the labels: the
    number of ring edges crossing each group's uplink is counted, no pair
    matrix is formed.

The cost model is the one of :mod:`rankopt.models` on the flat network
:meth:`HierarchicalNetwork.to_network` builds (tests check the two agree on
small instances): two ranks of one host talk at ``intra_latency`` and
``intra_bandwidth``, ranks of different hosts at their hosts' entry, and the
uplinks are those of the hosts (level 0) and of every group above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import (
    RANGES,
    RankoptInputError,
    check_matrix,
    check_options,
    check_order,
    check_quantity,
)

__all__ = [
    "HierarchicalNetwork",
    "ring_cost",
    "RING_COLLECTIVES",
    "FLAT_MAX_N",
]

#: Collectives whose ring schedule :func:`ring_cost` prices.
RING_COLLECTIVES = ("allreduce", "allgather", "reduce_scatter")

#: Largest ``n`` :meth:`HierarchicalNetwork.to_network` builds a flat (n, n) network for.
FLAT_MAX_N = 8192

_HOST_DTYPES = (np.float64, np.float32)


def _labels(lab: ArrayLike, size: int, name: str) -> NDArray[np.int64]:
    arr = np.asarray(lab)
    if arr.shape != (size,) or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise RankoptInputError(
            f"`{name}` must be {size} integer labels; got shape {arr.shape}, dtype {arr.dtype}."
        )
    out = np.unique(arr, return_inverse=True)[1].reshape(-1).astype(np.int64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class HierarchicalNetwork:
    """A network given per host: the host of every rank and host-level matrices.

    Parameters
    ----------
    host_of : array_like of int (n,)
        ``host_of[i]``: the host (0..H-1) of the process at original rank ``i``.
        Every host holds at least one process.
    latency : array_like (H, H)
        One-way latency between hosts in seconds (float32 input stays
        float32; the diagonal is ignored).
    bandwidth : array_like (H, H), optional
        Pair bandwidth between hosts in bytes/s.
    groups : sequence of array_like of int (H,), optional
        Group of every *host* per level above the hosts (racks, then pods),
        finest first, each level nested in the next.
    uplinks : sequence, optional
        Uplink capacity per direction (bytes/s), one entry per level
        *including the hosts*: ``uplinks[0]`` the hosts' (a number or H
        rates), ``uplinks[k + 1]`` the groups of ``groups[k]`` (a number or
        one rate per group in order of the sorted labels).
    intra_latency, intra_bandwidth : float
        Latency and bandwidth between two ranks of one host (default 0 s and
        1e15 B/s, the largest valid rate).
    hosts : sequence of str, optional
        Host names (H).
    source : str
        Where the numbers came from.

    Notes
    -----
    Memory is that of the host-level matrices (a float32 input is kept as a
    read-only view, not copied, when its diagonal is zero) plus :math:`O(n)`
    labels. :meth:`to_network` expands it to the flat :class:`rankopt.Network`
    for small ``n`` (checks and the reference evaluators).

    Examples
    --------
    Two racks of two hosts, two ranks per host, the ranks launched interleaved:

    >>> import numpy as np, rankopt
    >>> rack = np.array([0, 0, 1, 1])
    >>> lat = np.where(rack[:, None] == rack[None, :], 10e-6, 40e-6)
    >>> net = HierarchicalNetwork([0, 1, 2, 3, 0, 1, 2, 3], lat, groups=[rack],
    ...                           intra_latency=1e-6)
    >>> net.n, net.n_hosts, net.contiguous_order().tolist()
    (8, 4, [0, 4, 1, 5, 2, 6, 3, 7])
    >>> res = rankopt.solve(net)  # the ring's latency sum: 4 host links, 4 in-host links
    >>> round(res.cost * 1e6, 6), net.cost(res.order) == res.cost
    (104.0, True)
    """

    host_of: NDArray[np.int64]
    latency: NDArray[Any]
    bandwidth: NDArray[Any] | None = None
    groups: tuple[NDArray[np.int64], ...] = ()
    uplinks: tuple[NDArray[np.float64], ...] = ()
    intra_latency: float = 0.0
    intra_bandwidth: float = RANGES["bandwidth"].high
    hosts: tuple[str, ...] | None = None
    source: str = "hierarchical"
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        lat = check_matrix(self.latency, "latency", copy=False, dtypes=_HOST_DTYPES)
        h = lat.shape[0]
        set_(self, "latency", lat)
        if self.bandwidth is not None:
            bw = check_matrix(
                self.bandwidth, "bandwidth", quantity="bandwidth", copy=False, dtypes=_HOST_DTYPES
            )
            if bw.shape != lat.shape:
                raise RankoptInputError(
                    f"`bandwidth` must have the shape of `latency` {lat.shape}; got {bw.shape}."
                )
            set_(self, "bandwidth", bw)
        host_of = np.asarray(self.host_of)
        if host_of.ndim != 1 or host_of.size < 2 or not np.issubdtype(host_of.dtype, np.integer):
            raise RankoptInputError(
                "`host_of` must be a 1-D integer array, one host per process (at least 2); "
                f"got shape {host_of.shape}, dtype {host_of.dtype}."
            )
        counts = np.bincount(host_of.clip(0), minlength=h) if host_of.size else np.zeros(h)
        if host_of.min() < 0 or host_of.max() >= h or counts.size != h or not np.all(counts):
            empty = np.flatnonzero(counts[:h] == 0)
            raise RankoptInputError(
                f"`host_of` must name hosts 0..{h - 1} (the rows of `latency`), each at least "
                "once; "
                + (
                    f"host {int(empty[0])} has no process."
                    if empty.size and host_of.min() >= 0 and host_of.max() < h
                    else f"got labels {int(host_of.min())}..{int(host_of.max())}."
                )
            )
        host_of = np.ascontiguousarray(host_of, dtype=np.int64)
        host_of.setflags(write=False)
        set_(self, "host_of", host_of)
        levels = tuple(_labels(g, h, f"groups[{k}]") for k, g in enumerate(self.groups))
        for k in range(1, len(levels)):
            fine, coarse = levels[k - 1], levels[k]
            parent = np.full(int(fine.max()) + 1, -1)
            parent[fine] = coarse
            if np.any(parent[fine] != coarse):
                raise RankoptInputError(
                    f"`groups` level {k - 1} must be nested in level {k}: a group of level "
                    f"{k - 1} spans several groups of level {k}."
                )
        set_(self, "groups", levels)
        ups = tuple(self.uplinks)
        if ups and len(ups) != len(levels) + 1:
            raise RankoptInputError(
                f"`uplinks` must give one entry per level including the hosts "
                f"({len(levels) + 1}); got {len(ups)}."
            )
        sizes = [h] + [int(lab.max()) + 1 for lab in levels]
        checked = []
        for k, (u, g) in enumerate(zip(ups, sizes, strict=False)):
            vals = np.array(u, dtype=np.float64, copy=True).reshape(-1)
            if vals.size == 1:
                vals = np.full(g, float(vals[0]))
            if vals.shape != (g,):
                raise RankoptInputError(
                    f"`uplinks` level {k} must be a number or one rate per group ({g}); "
                    f"got {vals.size} values."
                )
            rng = RANGES["bandwidth"]
            ok = np.isfinite(vals) & (vals >= rng.low) & (vals <= rng.high)
            if not ok.all():
                bad = int(np.flatnonzero(~ok)[0])
                raise RankoptInputError(
                    f"`uplinks` must be finite, between {rng.low:g} and {rng.high:g} B/s; "
                    f"level {k} group {bad} is {float(vals[bad])!r}."
                )
            vals.setflags(write=False)
            checked.append(vals)
        set_(self, "uplinks", tuple(checked))
        il = float(self.intra_latency)
        if not (np.isfinite(il) and 0.0 <= il <= RANGES["latency"].high):
            raise RankoptInputError(
                f"`intra_latency` must be finite, between 0 and 1e6 s; got {il!r}."
            )
        set_(self, "intra_latency", il)
        set_(
            self,
            "intra_bandwidth",
            check_quantity(self.intra_bandwidth, "intra_bandwidth", "bandwidth"),
        )
        if self.hosts is not None:
            names = tuple(str(x) for x in self.hosts)
            if len(names) != h:
                raise RankoptInputError(
                    f"`hosts` must name each of the {h} hosts; got {len(names)} names."
                )
            set_(self, "hosts", names)
        set_(self, "source", str(self.source))
        set_(self, "provenance", dict(self.provenance))

    # ------------------------------------------------------------------ shape
    @property
    def n(self) -> int:
        """Number of processes."""
        return int(self.host_of.shape[0])

    @property
    def n_hosts(self) -> int:
        """Number of hosts."""
        return int(self.latency.shape[0])

    @property
    def has_uplinks(self) -> bool:
        """Whether every level (hosts included) has its uplink capacities."""
        return len(self.uplinks) == len(self.groups) + 1

    def host_levels(self) -> list[NDArray[np.int64]]:
        """Group of every host per level, the hosts themselves first."""
        return [np.arange(self.n_hosts, dtype=np.int64), *self.groups]

    def rank_levels(self) -> list[NDArray[np.int64]]:
        """Group of every process per level (hosts, then ``groups``), finest first."""
        return [lab[self.host_of] for lab in self.host_levels()]

    def level_sizes(self) -> list[list[int]]:
        """Process count of the groups of every level, finest first."""
        return [np.bincount(lab).tolist() for lab in self.rank_levels()]

    def contiguous_order(self) -> NDArray[np.int64]:
        """The hierarchy-contiguous order: by top-level group, ..., host, then launch rank.

        Every host, rack and pod is one run of the ring: each uplink is
        crossed by one ring edge per direction, the fewest a ring can.
        """
        keys = [np.arange(self.n, dtype=np.int64), *self.rank_levels()]
        return np.asarray(np.lexsort(keys), dtype=np.int64)

    # ---------------------------------------------------------------- models
    def default_model(self, nbytes: float | None = None) -> dict[str, Any]:
        """What :func:`rankopt.solve` prices when told nothing (as :meth:`rankopt.Network.default_model`).

        ``"contention"`` at ``nbytes`` (default :data:`rankopt.network.DEFAULT_NBYTES`)
        with bandwidth and uplinks, ``"time"`` with bandwidth only, the
        ring's latency ``"sum"`` otherwise.
        """
        from rankopt.network.core import DEFAULT_NBYTES

        size = DEFAULT_NBYTES if nbytes is None else float(nbytes)
        if self.bandwidth is not None and self.has_uplinks:
            return {"objective": "contention", "nbytes": size}
        if self.bandwidth is not None:
            return {"objective": "time", "nbytes": size}
        return {"objective": "sum", "nbytes": nbytes}

    def cost(
        self,
        order: ArrayLike,
        collective: str = "allreduce",
        *,
        objective: str | None = None,
        nbytes: float | None = None,
    ) -> float:
        """Modelled cost of the ring ``order`` (see :func:`ring_cost`)."""
        return ring_cost(self, order, collective, objective=objective, nbytes=nbytes)

    def to_network(self) -> Any:
        """The flat :class:`rankopt.Network` over the ranks (small ``n`` only).

        Raises
        ------
        RankoptInputError
            When ``n`` exceeds :data:`FLAT_MAX_N` (the point of this form is
            not to build that matrix).
        """
        from rankopt.network.core import Network

        if self.n > FLAT_MAX_N:
            raise RankoptInputError(
                f"to_network builds an (n, n) matrix; n = {self.n} is above {FLAT_MAX_N}."
            )
        h = self.host_of
        same = h[:, None] == h[None, :]
        lat = np.where(same, self.intra_latency, np.asarray(self.latency, np.float64)[np.ix_(h, h)])
        np.fill_diagonal(lat, 0.0)
        bw = None
        if self.bandwidth is not None:
            bw = np.where(
                same, self.intra_bandwidth, np.asarray(self.bandwidth, np.float64)[np.ix_(h, h)]
            )
            np.fill_diagonal(bw, 0.0)
        levels = self.rank_levels()
        return Network(
            latency=lat,
            bandwidth=bw,
            groups=tuple(levels),
            uplinks=self.uplinks if self.has_uplinks else (),
            source=self.source,
        )

    def describe(self) -> str:
        """One line: processes, hosts, levels and what is known."""
        parts = [f"{self.n} processes on {self.n_hosts} hosts", self.source]
        parts += [
            f"{int(lab.max()) + 1} groups at level {k + 1}" for k, lab in enumerate(self.groups)
        ]
        parts.append("with bandwidth" if self.bandwidth is not None else "latency only")
        if self.has_uplinks:
            parts.append("uplinks on every level")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"HierarchicalNetwork({self.describe()})"


# ----------------------------------------------------------------- the model
def _ring_steps(collective: str, n: int) -> list[tuple[float, int]]:
    """``(fraction of nbytes per transfer, repeats)`` of the ring schedule's steps."""
    check_options("collective", collective, RING_COLLECTIVES)
    steps = (n - 1) * (2 if collective == "allreduce" else 1)
    return [(1.0 / n, steps)]


def _edges(net: HierarchicalNetwork, order: NDArray[np.int64]) -> tuple[Any, Any, Any]:
    ha = net.host_of[order]
    hb = np.roll(ha, -1)
    return ha, hb, ha == hb


def _objective(
    net: HierarchicalNetwork, objective: str | None, nbytes: float | None
) -> tuple[str, float | None]:
    default = net.default_model(nbytes)
    obj = default["objective"] if objective is None else objective
    check_options("objective", obj, ("sum", "bottleneck", "time", "contention"))
    size = default["nbytes"] if nbytes is None else check_quantity(nbytes, "nbytes", "nbytes")
    if obj == "contention":
        if not net.has_uplinks:
            raise RankoptInputError(
                "objective 'contention' needs `uplinks` on every level (hosts included)."
            )
        if size is None:
            from rankopt.network.core import DEFAULT_NBYTES

            size = DEFAULT_NBYTES
    return obj, size


def ring_cost(
    net: HierarchicalNetwork,
    order: ArrayLike,
    collective: str = "allreduce",
    *,
    objective: str | None = None,
    nbytes: float | None = None,
) -> float:
    """Modelled cost of a ring order on a :class:`HierarchicalNetwork`.

    Parameters
    ----------
    net : HierarchicalNetwork
    order : array_like of int (n,)
        ``order[k]``: original rank of the process given new rank ``k``.
    collective : {"allreduce", "allgather", "reduce_scatter"}
    objective : {"sum", "bottleneck", "time", "contention"}, optional
        Default :meth:`HierarchicalNetwork.default_model`.
    nbytes : float, optional
        Message size (``time``, ``contention``).

    Returns
    -------
    float
        Seconds: what :func:`rankopt.cost` gives for the same order on
        :meth:`HierarchicalNetwork.to_network` (tests check it).

    Notes
    -----
    Ring edge ``k`` runs from ``a = order[k]`` to ``b = order[k + 1]``. A ring
    step moves ``nbytes / n`` over every edge at once; the edge takes
    ``latency + nbytes / n / rate`` with ``rate`` the smallest of the pair's
    bandwidth and, at every level where ``a`` and ``b`` are in different
    groups, ``uplink[g] / K[g]`` of both groups, ``K`` being the number of
    ring edges that leave (enter) the group. The step lasts as long as its
    slowest edge; allreduce runs ``2(n - 1)`` steps, the others ``n - 1``.
    ``K`` is a bincount over the edges per level, so the whole evaluation is
    :math:`O(n \\cdot \\text{levels})` time and memory.
    """
    n = net.n
    order = check_order(order, n)
    obj, size = _objective(net, objective, nbytes)
    ha, hb, same = _edges(net, order)
    lat_e = np.where(same, net.intra_latency, net.latency[ha, hb]).astype(np.float64)
    if obj == "sum":
        return float(lat_e.sum())
    if obj == "bottleneck":
        return float(lat_e.max())
    steps = _ring_steps(collective, n)
    if size is None or (net.bandwidth is None and obj == "time"):
        return float(sum(rep * float(lat_e.max()) for _, rep in steps))
    rate = np.full(n, np.inf)
    if net.bandwidth is not None:
        rate = np.where(same, net.intra_bandwidth, net.bandwidth[ha, hb]).astype(np.float64)
    if obj == "contention":
        for lab, cap in zip(net.host_levels(), net.uplinks, strict=True):
            ga, gb = lab[ha], lab[hb]
            cross = ga != gb
            g = cap.size
            k_out = np.bincount(ga[cross], minlength=g)
            k_in = np.bincount(gb[cross], minlength=g)
            with np.errstate(divide="ignore"):
                r = np.minimum(cap[ga] / k_out[ga], cap[gb] / k_in[gb])
            rate = np.where(cross, np.minimum(rate, r), rate)
    return float(sum(rep * float((lat_e + frac * size / rate).max()) for frac, rep in steps))
