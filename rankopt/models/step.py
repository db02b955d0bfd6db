"""Time models built from a schedule: α-β, step-synchronous, shared uplinks.

``objective="time"``
    Each step lasts as long as its slowest transfer,
    ``latency[a, b] + frac * nbytes / bandwidth[a, b]``; the total is the sum
    over steps. Without bandwidth (or without ``nbytes``) only latency counts.
``objective="contention"``
    As ``"time"``, and the transfers of a step that leave (enter) a group
    share its uplink in that direction: K of them get ``uplink / K`` each
    (``uplink`` out of the group, ``uplink_in`` into it); where the network
    says the slowest of several gets less than its fair share
    (:attr:`Network.straggle`), a transfer crowded at both ends by ``c``
    transfers gets ``uplink / (K * c**(straggle - 1))``: ``K**straggle`` for
    ``K`` transfers from one group into one group.

See :func:`rankopt.models.network.reference_time` for the exact spec, which
the compiled kernel (``src_ext/_schedule_eval.pyx``) is tested against.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt.models._algorithms import algorithm_spec
from rankopt.models.base import Capabilities, CostModel
from rankopt.models.contention import make_step_contention
from rankopt.models.network import NetworkArrays, crowd_table, reference_time
from rankopt.models.schedule import Schedule, schedule

_schedule_eval = require_extension("rankopt.models._schedule_eval")

__all__ = ["StepModel", "HierarchicalModel", "make_evaluator"]


def _as_order(order: NDArray[np.int64]) -> NDArray[np.int64]:
    if isinstance(order, np.ndarray) and order.dtype == np.int64 and order.flags.c_contiguous:
        return order
    return np.ascontiguousarray(order, dtype=np.int64)


def make_evaluator(
    sched: Schedule, net: NetworkArrays, *, index: bool = True, per_end: bool = False
):
    """The compiled evaluator of ``sched`` on ``net``.

    With ``index`` it also builds, for every rank, the list of transfers it
    takes part in (what swap deltas need). ``per_end``: the sharing exponent
    on each end's count alone (``K**straggle`` on every shared uplink), the
    proxy of :attr:`~rankopt.models.base.Capabilities.proxy_search`, not the
    model's cost.
    """
    n = sched.n
    ne = sched.n_transfers
    tstep = np.repeat(np.arange(sched.n_distinct, dtype=np.int64), np.diff(sched.step_ptr))
    if index and ne:
        ranks = np.concatenate([sched.src, sched.dst])
        ids = np.concatenate([np.arange(ne), np.arange(ne)]).astype(np.int64)
        key = np.lexsort((ids, ranks))
        rtr = np.ascontiguousarray(ids[key])
        rptr = np.zeros(n + 1, dtype=np.int64)
        rptr[1:] = np.cumsum(np.bincount(ranks, minlength=n))
        per = np.bincount(ranks * sched.n_distinct + np.concatenate([tstep, tstep]))
        bufsize = 2 * int(per.max())
    else:
        rtr = np.zeros(0, dtype=np.int64)
        rptr = np.zeros(n + 1, dtype=np.int64)
        bufsize = 1
    bw = net.bandwidth if net.bandwidth is not None else np.zeros((1, 1))
    most = int(np.diff(sched.step_ptr).max(initial=0))
    return _schedule_eval.StepEval(
        net.latency,
        bw,
        net.bandwidth is not None,
        float(net.nbytes or 0.0),
        net.has_rate,
        net.labels,
        *net.capacities(),
        net.shares(most),
        crowd_table(max(most, net.n)) if per_end else net.crowding(most),
        net.tenant,
        net.tenant_in,
        sched.src,
        sched.dst,
        sched.frac,
        sched.step_ptr,
        sched.repeat,
        tstep,
        rptr,
        rtr,
        bufsize,
    )


class StepModel(CostModel):
    """α-β time (``"time"``) or time with shared uplinks (``"contention"``) of a schedule.

    The schedule is fixed in new-rank numbers, so a swap of new ranks ``i``
    and ``j`` only changes the steps in which ``i`` or ``j`` take part;
    :meth:`swap_delta` revisits just those (``O(lg n)`` steps for recursive
    doubling/halving, Rabenseifner, Bruck and the trees; every step for
    pairwise all-to-all), each in ``O(1)`` unless its slowest transfer moved
    or uplinks are shared, then in ``O(step size)``.

    Attributes
    ----------
    schedule : Schedule
        The algorithm's steps. ``schedule.pattern()`` gives, per distinct
        step, its partner structure (``("xor", d, frac, repeat)`` for
        recursive doubling/halving: partner ``k ^ d``, ``frac * nbytes`` bytes;
        ``("shift", d, ...)`` for rings and Bruck) -- what a constructive
        solver (greedy clustering) needs to know which distances carry the
        most bytes.
    network : NetworkArrays
    evaluator : StepEval
        The compiled kernel: ``cost``, ``batch_cost``, ``swap_delta``,
        ``swap_deltas`` (many pairs in one call), ``step_times`` and
        ``search`` (first-improvement swap local search).

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> lat = np.full((4, 4), 1e-6)
    >>> net = make_network(lat, bandwidth=1e9, nbytes=1e6)
    >>> m = StepModel(schedule("allreduce", "rabenseifner", 4), net, "time")
    >>> round(m.cost(np.arange(4)) * 1e6, 6)  # 2 lg p a + 2 (p-1)/p n/B, in us
    1504.0
    """

    def __init__(self, sched: Schedule, net: NetworkArrays, objective: str) -> None:
        self.schedule = sched
        self.network = net
        self.n = sched.n
        self.objective = objective
        ring = algorithm_spec(sched.collective, sched.algorithm).ring
        self.evaluator = make_evaluator(sched, net)
        proxy = None
        if objective == "contention":  # incremental uplink counts where they apply
            fast = make_step_contention(sched, net, self.evaluator, alike=ring)
            if fast is not None:
                self.evaluator = fast
            elif net.straggle != 1.0 and net.levels and net.has_rate:
                # a share that depends on both ends has no incremental deltas: the
                # same kernel on each end's count alone guides large searches
                per_end = make_evaluator(sched, net, index=False, per_end=True)
                proxy = make_step_contention(sched, net, per_end, alike=ring, per_end=True)
        self.capabilities = Capabilities(
            rotation_invariant=ring,
            ring_schedule=ring,
            latency=net.latency,
            bandwidth=net.bandwidth,
            nbytes=net.nbytes,
            swap_search=self.evaluator,
            proxy_search=proxy,
            partners=sched.partners(),
            groups=tuple(net.labels),
            uplinks=(net.uplink, net.uplink_in)
            if objective == "contention" and net.levels
            else None,
        )

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return reference_time(self.schedule, self.network, np.asarray(order))

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(self.evaluator.cost(_as_order(order)))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.evaluator.batch_cost(np.ascontiguousarray(orders, dtype=np.int64))

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        return self.evaluator.swap_delta(_as_order(order), i, j)

    def swap_deltas(
        self, order: NDArray[np.int64], pairs: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """Cost changes of many swaps ``pairs[r] = (i, j)`` from ``order`` (one call)."""
        return self.evaluator.swap_deltas(
            _as_order(order), np.ascontiguousarray(pairs, dtype=np.int64)
        )


class HierarchicalModel(CostModel):
    """A grouped algorithm (``model="hierarchical"``): its schedule depends on where each rank runs.

    The group of new rank ``k`` is ``groups[order[k]]`` (the finest level of
    the hierarchy: hosts). Groups are taken in the order of their lowest new
    rank and members by new rank, so listing new ranks group after group
    (positions) gives a schedule that depends only on the sequence of group
    sizes: :meth:`cost` maps the order to positions (``O(n log n)`` in NumPy)
    and evaluates the compiled schedule of that size sequence, built once and
    cached. :meth:`swap_delta` is the difference of two full evaluations.
    ``collective``/``algorithm`` name the registered algorithm whose generator
    takes the groups (``options=("groups",)``).
    """

    _CACHE = 32

    def __init__(
        self,
        net: NetworkArrays,
        groups: NDArray[np.int64],
        objective: str,
        inter: str | None = None,
        *,
        collective: str = "allreduce",
        algorithm: str = "hierarchical",
    ) -> None:
        self.collective, self.algorithm = collective, algorithm
        self.network = net
        self.groups = np.asarray(groups, dtype=np.int64)
        self.n = net.n
        self.objective = objective
        self.inter = inter
        self.capabilities = Capabilities(
            latency=net.latency, bandwidth=net.bandwidth, nbytes=net.nbytes
        )
        self._evaluators: dict[bytes, object] = {}
        self._labels = np.unique(self.groups, return_inverse=True)[1].reshape(-1).astype(np.int64)
        self._ngroups = int(self._labels.max()) + 1
        self._asc = np.arange(self.n, dtype=np.int64)
        self._desc = self._asc[::-1].copy()

    def schedule_for(self, order: NDArray[np.int64]) -> Schedule:
        """The schedule the algorithm runs under ``order``."""
        return schedule(
            self.collective,
            self.algorithm,
            self.n,
            groups=self.groups[np.asarray(order)],
            inter=self.inter,
        )

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return reference_time(self.schedule_for(order), self.network, np.asarray(order))

    def positions(self, order: NDArray[np.int64]) -> tuple[bytes, NDArray[np.int64]]:
        """Group sizes in group order (int64 bytes) and the new rank at each position.

        Position ``p`` holds new rank ``ranks[p]``: the members of the first
        group (the group of new rank 0) by new rank, then the next group, ...
        """
        lab = self._labels[order]
        first = np.empty(self._ngroups, dtype=np.int64)
        first[lab[::-1]] = self._desc  # the last write wins: the lowest new rank
        rank_of_group = np.empty(self._ngroups, dtype=np.int64)
        rank_of_group[np.argsort(first)] = self._asc[: self._ngroups]
        key = rank_of_group[lab]
        return np.bincount(key, minlength=self._ngroups).tobytes(), np.argsort(key, kind="stable")

    def _evaluator(self, sizes: bytes):
        ev = self._evaluators.get(sizes)
        if ev is None:
            lab = np.repeat(np.arange(self._ngroups), np.frombuffer(sizes, dtype=np.int64))
            sched = schedule(self.collective, self.algorithm, self.n, groups=lab, inter=self.inter)
            ev = make_evaluator(sched, self.network, index=False)
            if len(self._evaluators) >= self._CACHE:
                self._evaluators.pop(next(iter(self._evaluators)))
            self._evaluators[sizes] = ev
        return ev

    def cost(self, order: NDArray[np.int64]) -> float:
        o = _as_order(order)
        sizes, ranks = self.positions(o)
        return float(self._evaluator(sizes).cost(np.ascontiguousarray(o[ranks])))
