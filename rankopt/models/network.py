"""The network a time model sees, validated once, and the reference evaluator.

Contents
--------
NetworkArrays
    Latency, optional bandwidth, message size and the uplink hierarchy.
make_network
    Validation of ``bandwidth``, ``nbytes``, ``groups``, ``uplink_bandwidth``.
reference_time
    The slow, obviously correct evaluation of a :class:`Schedule` under an
    order: the spec every compiled kernel is tested against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import (
    RANGES,
    RankoptInputError,
    check_elastic,
    check_groups,
    check_matrix,
    check_quantity,
    check_straggle,
)
from rankopt.models.schedule import Schedule

__all__ = [
    "NetworkArrays",
    "make_network",
    "check_groups",
    "check_straggle",
    "reference_time",
    "crowd_table",
    "share_table",
    "tenant_flows",
]


@dataclass(frozen=True, eq=False)
class NetworkArrays:
    """Everything an α-β(-contention) model needs, indexed by original rank.

    Attributes
    ----------
    latency : ndarray (n, n)
        One-way latency in seconds.
    bandwidth : ndarray (n, n) or None
        Pair bandwidth in bytes/s; ``None`` means no per-pair bandwidth term.
    nbytes : float or None
        Message size in bytes (see :func:`rankopt.schedule`).
    labels : ndarray (levels, n) of int64
        Group of each process per level (finest first), relabelled 0..G-1 in
        the order of the sorted input labels.
    uplink : ndarray (levels, max G) of float64
        Capacity of each group's uplink out of the group (bytes/s); ``inf`` pads.
    uplink_in : ndarray (levels, max G) of float64
        Capacity of each group's uplink into the group (bytes/s); the same
        array as ``uplink`` when the capacities were given without direction.
    straggle : float
        How the transfers of one step share an uplink. A transfer that
        leaves its group beside ``K_out - 1`` others and enters the other
        group beside ``K_in - 1`` others is crowded at both ends with
        ``c = min(K_out, K_in)``; it gets ``uplink / (K_out * c**(straggle -
        1))`` of the uplink out and ``uplink_in / (K_in * c**(straggle - 1))``
        of the one in (see :func:`crowd_table`): ``K**straggle`` for ``K``
        transfers from one group into one group, what the probe's sharing
        test runs and measures. ``1.0`` is an even split; above it, the
        slowest of several transfers that wait for each other gets less than
        its fair share where it crosses two crowded uplinks (TCP flows
        through bottlenecks in series do); a transfer whose other end is not
        crowded gets its fair share.
    elastic : float
        How much of another tenant's load on an uplink yields to more flows
        (0: none, paced traffic keeps its rate; 1: all of it, as TCP flows
        do). With ``m`` tenant flows on an uplink (:func:`tenant_flows`),
        ``K`` transfers each get ``uplink * (1 + m) / (K * c**(straggle - 1)
        + m)`` (``uplink`` being what one transfer alone gets beside the
        tenant).
    tenant : ndarray (levels, max G) of float64
        ``m`` of each uplink out of its group (zeros with ``elastic == 0``).
    tenant_in : ndarray (levels, max G) of float64
        ``m`` of each uplink into its group.
    """

    latency: NDArray[np.float64]
    bandwidth: NDArray[np.float64] | None
    nbytes: float | None
    labels: NDArray[np.int64]
    uplink: NDArray[np.float64]
    uplink_in: NDArray[np.float64]
    straggle: float = 1.0
    elastic: float = 0.0
    tenant: NDArray[np.float64] | None = None
    tenant_in: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        if self.tenant is None or self.tenant_in is None:
            out, inn = tenant_flows(self.uplink, self.uplink_in, self.elastic)
            object.__setattr__(self, "tenant", out)
            object.__setattr__(self, "tenant_in", inn)

    @property
    def n(self) -> int:
        return int(self.latency.shape[0])

    @property
    def levels(self) -> int:
        return int(self.labels.shape[0])

    def shares(self, most: int = 0) -> NDArray[np.float64]:
        """:func:`share_table` up to ``max(most, n)`` transfers (what the kernels divide by)."""
        return share_table(max(int(most), self.n), self.straggle)

    def crowding(self, most: int = 0) -> NDArray[np.float64]:
        """:func:`crowd_table` up to ``max(most, n)`` transfers."""
        return crowd_table(max(int(most), self.n), self.straggle)

    def capacities(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``uplink * (1 + tenant)`` out and in: what the kernels divide by
        ``share[K] + tenant`` (the uplinks themselves when nothing yields)."""
        assert self.tenant is not None and self.tenant_in is not None
        if self.elastic == 0.0:
            return self.uplink, self.uplink_in
        return (
            np.ascontiguousarray(self.uplink * (1.0 + self.tenant)),
            np.ascontiguousarray(self.uplink_in * (1.0 + self.tenant_in)),
        )

    @property
    def has_rate(self) -> bool:
        """Whether transfers have a bytes term (bandwidth or uplinks with a size)."""
        return self.nbytes is not None and (self.bandwidth is not None or self.levels > 0)


def share_table(n: int, straggle: float = 1.0) -> NDArray[np.float64]:
    """``K**straggle`` for ``K = 0..n``: a step's ``K`` transfers through one
    uplink each get ``uplink / share[K]``.

    With ``straggle == 1`` the entries are ``K`` exactly, so the kernels'
    division is the even split to the last bit.

    >>> share_table(3).tolist(), share_table(3, 1.5).round(3).tolist()
    ([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.828, 5.196])
    """
    k = np.arange(n + 1, dtype=np.float64)
    return k if straggle == 1.0 else np.ascontiguousarray(k**straggle)


def crowd_table(n: int, straggle: float = 1.0) -> NDArray[np.float64]:
    """``c**(straggle - 1)`` for ``c = 0..n`` (1 at ``c = 0``): what a transfer
    crowded at both ends by ``c`` transfers (:attr:`NetworkArrays.straggle`)
    multiplies its uplinks' counts by.

    With ``straggle == 1`` every entry is 1 exactly, so ``K * crowd[c]`` is the
    even split ``K`` to the last bit.

    >>> crowd_table(3).tolist(), crowd_table(3, 1.5).round(3).tolist()
    ([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.414, 1.732])
    """
    c = np.arange(n + 1, dtype=np.float64)
    if straggle == 1.0:
        return np.ones(n + 1)
    out = c ** (straggle - 1.0)
    out[0] = 1.0
    return np.ascontiguousarray(out)


def tenant_flows(
    uplink: NDArray[np.float64], uplink_in: NDArray[np.float64], elastic: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Other tenants' flows on every uplink that yield to ours, out and in.

    An uplink that gives one transfer ``u`` where the least loaded uplink of
    its level (either direction) gives ``C`` carries load from elsewhere;
    if that load is TCP it is about ``C / u - 1`` flows, each taking what
    one of ours takes, and it yields to more flows of ours. ``elastic``
    (the probe's sharing test on a loaded uplink measures it) scales that
    count: ``m = elastic * (C / u - 1)``. ``K`` transfers then get
    ``u * (1 + m) / (K**straggle + m)`` each: ``u / K**straggle`` with
    ``m = 0``, and ``C / (K + m)``, the fair share beside ``m`` flows, with
    ``straggle = 1``. Padding (``inf``) and unloaded uplinks get 0.

    >>> up = np.array([[30.0, 10.0, np.inf]])
    >>> tenant_flows(up, up, 1.0)[0].tolist()
    [[0.0, 2.0, 0.0]]
    """
    out = np.zeros(uplink.shape, dtype=np.float64)
    inn = np.zeros(uplink_in.shape, dtype=np.float64)
    if elastic == 0.0 or uplink.size == 0:
        return out, inn
    for lev in range(uplink.shape[0]):
        both = np.concatenate([uplink[lev], uplink_in[lev]])
        both = both[np.isfinite(both)]
        if both.size == 0:
            continue
        top = float(both.max())
        for src, dst in ((uplink, out), (uplink_in, inn)):
            row = src[lev]
            fin = np.isfinite(row) & (row > 0)
            dst[lev, fin] = elastic * np.maximum(top / row[fin] - 1.0, 0.0)
    return np.ascontiguousarray(out), np.ascontiguousarray(inn)


def _check_uplinks(
    uplink_bandwidth: Any, labels: list[NDArray[np.int64]]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(out, in) capacities, each (levels, max G) with ``inf`` padding.

    Per level: a number (every group, both directions), one rate per group
    (both directions) or a ``(2, G)`` array (row 0 out of the group, row 1 in).
    """
    nlev = len(labels)
    gmax = max(int(lab.max()) + 1 for lab in labels)
    up = np.full((nlev, gmax), np.inf)
    down = np.full((nlev, gmax), np.inf)
    if isinstance(uplink_bandwidth, (list, tuple)):
        per = list(uplink_bandwidth)
    elif np.ndim(uplink_bandwidth) == 0:
        per = [uplink_bandwidth] * nlev
    else:
        per = list(np.asarray(uplink_bandwidth))
    if len(per) != nlev:
        raise RankoptInputError(
            f"`uplink_bandwidth` must give one entry per level ({nlev}); got {len(per)}."
        )
    for k, v in enumerate(per):
        g = int(labels[k].max()) + 1
        try:
            vals = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            raise RankoptInputError(
                f"`uplink_bandwidth` level {k} must be a number or an array of numbers; got {v!r}."
            ) from None
        if vals.ndim == 0:
            vals = np.full(g, float(vals))
        if vals.shape == (g,):
            vals = np.stack([vals, vals])
        if vals.shape != (2, g):
            raise RankoptInputError(
                f"`uplink_bandwidth` level {k} must be a number, one rate per group ({g}) or "
                f"(out, in) rates per group, shape (2, {g}); got shape {vals.shape}."
            )
        rng = RANGES["bandwidth"]
        ok = np.isfinite(vals) & (vals >= rng.low) & (vals <= rng.high)
        if not ok.all():
            d, bad = (int(x[0]) for x in np.nonzero(~ok))
            where = "" if np.array_equal(vals[0], vals[1]) else (" out", " in")[d]
            raise RankoptInputError(
                f"`uplink_bandwidth` must be finite, between {rng.low:g} and {rng.high:g} "
                f"{rng.unit}; level {k} group {bad}{where} is {float(vals[d, bad])!r}."
            )
        up[k, :g] = vals[0]
        down[k, :g] = vals[1]
    return up, down


def make_network(
    latency: NDArray[np.float64],
    *,
    bandwidth: Any = None,
    nbytes: Any = None,
    groups: Any = None,
    uplink_bandwidth: Any = None,
    straggle: Any = 1.0,
    elastic: Any = 0.0,
) -> NetworkArrays:
    """Validate the inputs of a time model (``latency`` is already validated).

    ``bandwidth`` may be a scalar (every pair) or an (n, n) matrix; groups are
    used only together with ``uplink_bandwidth``.
    """
    n = latency.shape[0]
    bw = None
    if bandwidth is not None:
        if np.ndim(bandwidth) == 0:
            b = check_quantity(bandwidth, "bandwidth", "bandwidth")
            bw = np.full((n, n), b)
        else:
            bw = check_matrix(bandwidth, "bandwidth", quantity="bandwidth")
            if bw.shape != (n, n):
                raise RankoptInputError(
                    f"`bandwidth` must have the shape of `latency` {(n, n)}; got {bw.shape}."
                )
        np.fill_diagonal(bw, np.inf)
    nb = None if nbytes is None else check_quantity(nbytes, "nbytes", "nbytes")
    if (bw is not None or uplink_bandwidth is not None) and nb is None:
        raise RankoptInputError(
            "`nbytes` is required with `bandwidth` or `uplink_bandwidth` (the message size in "
            "bytes); pass bandwidth=None for a latency-only model."
        )
    labels = np.zeros((0, n), dtype=np.int64)
    up = down = np.zeros((0, 1))
    if uplink_bandwidth is not None:
        if groups is None:
            raise RankoptInputError(
                "`uplink_bandwidth` needs `groups` (which group each process is in)."
            )
        labs = check_groups(groups, n)
        up, down = _check_uplinks(uplink_bandwidth, labs)
        labels = np.ascontiguousarray(np.array(labs, dtype=np.int64))
    up = np.ascontiguousarray(up)
    down = up if np.array_equal(up, down) else np.ascontiguousarray(down)
    return NetworkArrays(
        np.ascontiguousarray(latency, dtype=np.float64),
        bw,
        nb,
        labels,
        up,
        down,
        check_straggle(straggle),
        check_elastic(0.0 if elastic is None else elastic),
    )


def reference_time(sched: Schedule, net: NetworkArrays, order: NDArray[np.int64]) -> float:
    """Modelled seconds of ``sched`` under ``order`` -- the spec, written plainly.

    For every step: each transfer ``k -> j`` runs between ``a = order[k]`` and
    ``b = order[j]`` and takes ``latency[a, b] + frac * nbytes / rate`` where
    ``rate`` is the smallest of ``bandwidth[a, b]`` and, at every level where
    ``a`` and ``b`` are in different groups, ``uplink[g(a)] / (K_out * x)``
    and ``uplink_in[g(b)] / (K_in * x)`` -- ``K_out`` (``K_in``) being the
    number of transfers of this step that leave (enter) that group, and
    ``x = min(K_out, K_in) ** (net.straggle - 1)`` (1 by default: an even
    split; above 1 only where the transfer is crowded at both ends) --
    beside ``m`` yielding tenant flows (``net.tenant``, ``net.tenant_in``)
    the share is ``uplink * (1 + m) / (K * x + m)``. A step lasts as long as
    its slowest transfer and runs ``repeat`` times; the total is the sum
    over steps. Without bandwidth and uplinks only latency counts.
    """
    total = 0.0
    for s in range(sched.n_distinct):
        tr = range(int(sched.step_ptr[s]), int(sched.step_ptr[s + 1]))
        pairs = [(int(order[sched.src[e]]), int(order[sched.dst[e]])) for e in tr]
        out_cnt: dict[tuple[int, int], int] = {}
        in_cnt: dict[tuple[int, int], int] = {}
        for a, b in pairs:
            for lev in range(net.levels):
                ga, gb = int(net.labels[lev, a]), int(net.labels[lev, b])
                if ga != gb:
                    out_cnt[lev, ga] = out_cnt.get((lev, ga), 0) + 1
                    in_cnt[lev, gb] = in_cnt.get((lev, gb), 0) + 1
        longest = 0.0
        for e, (a, b) in zip(tr, pairs, strict=False):
            t = float(net.latency[a, b])
            if net.has_rate:
                rate = float(net.bandwidth[a, b]) if net.bandwidth is not None else float("inf")
                for lev in range(net.levels):
                    ga, gb = int(net.labels[lev, a]), int(net.labels[lev, b])
                    if ga != gb:
                        mo = float(net.tenant[lev, ga])  # type: ignore[index]
                        mi = float(net.tenant_in[lev, gb])  # type: ignore[index]
                        k_out, k_in = out_cnt[lev, ga], in_cnt[lev, gb]
                        x = 1.0 if net.straggle == 1.0 else min(k_out, k_in) ** (net.straggle - 1)
                        rate = min(
                            rate,
                            net.uplink[lev, ga] * (1.0 + mo) / (k_out * x + mo),
                            net.uplink_in[lev, gb] * (1.0 + mi) / (k_in * x + mi),
                        )
                t += float(sched.frac[e]) * float(net.nbytes) / rate  # type: ignore[arg-type]
            longest = max(longest, t)
        total += int(sched.repeat[s]) * longest
    return total
