"""Ring algorithms under ``"time"`` / ``"contention"``: every step is alike.

A ring's steps all send ``nbytes / n`` from each rank to the next, so the
step time is a function of the ring's edge multiset (and, with uplinks, of
how many ring edges leave and enter each group). With uplinks the swap
deltas come from ``src_ext/_ring_contention.pyx``: per (level, group,
direction) crossing counts and the largest edge latencies, so a swap costs
``O(levels log G)`` instead of a recount of the whole step.
"""

from __future__ import annotations

import numpy as np

from rankopt._build_check import require_extension
from rankopt.models.network import Network
from rankopt.models.schedule import Schedule
from rankopt.models.step import StepModel

_rc = require_extension("rankopt.models._ring_contention")

__all__ = ["RingTime", "is_ring"]


def is_ring(sched: Schedule) -> bool:
    """Whether every step sends the same payload from each rank ``k`` to ``k + 1``."""
    n = sched.n
    src = (
        sched.src.reshape(sched.n_distinct, -1)
        if sched.n_transfers == n * sched.n_distinct
        else None
    )
    if src is None:
        return False
    dst = sched.dst.reshape(sched.n_distinct, n)
    k = np.arange(n)
    return bool(
        np.all(src == k) and np.all(dst == (k + 1) % n) and np.all(sched.frac == sched.frac[0])
    )


class RingTime(StepModel):
    """α-β (``"time"``) or contention (``"contention"``) model of a ring schedule.

    Rotation invariant, and invariant under reversal for symmetric input.
    With uplinks, :attr:`evaluator` is a ``RingContention`` kernel: the same
    API as ``StepEval`` (full costs are delegated to it), with swap deltas in
    ``O(levels log G)`` for ``G`` groups.

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> from rankopt.models.schedule import schedule
    >>> rack = np.array([0, 0, 1, 1])
    >>> net = make_network(np.full((4, 4), 1e-6), bandwidth=1e10, nbytes=4e6, groups=rack,
    ...                    uplink_bandwidth=1e9)
    >>> m = RingTime(schedule("allreduce", "ring", 4), net, "contention")
    >>> o = np.array([0, 2, 1, 3])  # 4 crossings per direction -> 2
    >>> bool(np.isclose(m.swap_delta(o, 1, 2), m.cost([0, 1, 2, 3]) - m.cost(o)))
    True
    """

    rotation_invariant = True

    def __init__(self, sched: Schedule, net: Network, objective: str) -> None:
        super().__init__(sched, net, objective)
        if net.levels and net.has_rate and is_ring(sched):
            self.evaluator = make_ring_contention(sched, net, self.evaluator)


def make_ring_contention(sched: Schedule, net: Network, full):
    """The ``RingContention`` kernel of a ring schedule on a network with uplinks."""
    n = sched.n
    labels = net.labels
    G = net.uplink.shape[1]
    gptr = np.zeros((net.levels, G + 1), dtype=np.int64)
    gmem = np.zeros(net.levels * n, dtype=np.int64)
    for lev in range(net.levels):
        gptr[lev, 1:] = np.cumsum(np.bincount(labels[lev], minlength=G))
        gmem[lev * n : (lev + 1) * n] = np.argsort(labels[lev], kind="stable")
    bw = net.bandwidth if net.bandwidth is not None else np.zeros((1, 1))
    c = float(sched.frac[0]) * float(net.nbytes)  # type: ignore[arg-type]
    return _rc.RingContention(
        full,
        net.latency,
        bw,
        net.bandwidth is not None,
        c,
        float(sched.repeat.sum()),
        labels,
        net.uplink,
        gptr,
        gmem,
    )
