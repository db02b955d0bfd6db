"""All-at-once all-to-all: every block posted at the same time.

Open MPI's ``basic_linear`` and ``linear_sync`` alltoall (the latter with
``coll_tuned_alltoall_algorithm_max_requests`` at its default 0, "no
limit") and MPICH's ``scattered`` alltoall up to ``MPIR_CVAR_ALLTOALL_THROTTLE``
peers post an ``isend``/``irecv`` to every peer and wait for all of them.
There are no steps: the transfers share every link they cross for the
whole call.

:class:`ConcurrentTime` prices that as the busiest link's time plus one
latency: each process's own link carries all its blocks one after the other
(``sum frac * nbytes / bandwidth[a, b]`` out of ``a``, and the same into
``b``), and an uplink carries every block that leaves (enters) its group
(``objective="contention"``). The set of transfers is every ordered pair of
processes whatever the order, so the cost does not depend on the order: the
model adds a constant to a workload and leaves the order to the other calls.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rankopt.models.base import Capabilities, CostModel
from rankopt.models.network import NetworkArrays
from rankopt.models.schedule import Schedule

__all__ = ["ConcurrentTime", "concurrent_time"]


def concurrent_time(
    sched: Schedule, net: NetworkArrays, order: NDArray[np.int64], objective: str
) -> float:
    """Modelled seconds of one step of concurrent transfers under ``order`` -- the spec.

    ``max latency + max over links of (bytes on the link / its rate)``: the
    sending and the receiving process of each transfer, and, with
    ``objective="contention"``, every uplink it leaves or enters.
    """
    order = np.asarray(order, dtype=np.int64)
    if sched.n_distinct != 1 or int(sched.repeat[0]) != 1:
        raise AssertionError("a concurrent model prices one step that runs once")
    ne = int(sched.step_ptr[1])
    a = order[sched.src[:ne]]
    b = order[sched.dst[:ne]]
    if ne == 0:
        return 0.0
    lat = float(net.latency[a, b].max())
    if not net.has_rate:
        return lat
    nbytes = sched.frac[:ne] * float(net.nbytes)  # type: ignore[arg-type]
    busiest = 0.0
    if net.bandwidth is not None:
        t = nbytes / net.bandwidth[a, b]
        busiest = max(
            float(np.bincount(a, weights=t, minlength=net.n).max()),
            float(np.bincount(b, weights=t, minlength=net.n).max()),
        )
    if objective == "contention":
        g = net.uplink.shape[1]
        for lev in range(net.levels):
            ga, gb = net.labels[lev, a], net.labels[lev, b]
            cross = ga != gb
            # out of a's group over its uplink, into b's over b's uplink in
            for side, cap in ((ga[cross], net.uplink[lev]), (gb[cross], net.uplink_in[lev])):
                load = np.bincount(side, weights=nbytes[cross], minlength=g)
                used = load > 0  # padding groups carry nothing (and may have no rate)
                busiest = max(busiest, float((load[used] / cap[used]).max(initial=0)))
    return lat + busiest


class ConcurrentTime(CostModel):
    """Time of a schedule's single step of concurrent transfers (see the module).

    :meth:`reference_cost` evaluates :func:`concurrent_time` under the order
    it is given; :meth:`cost` returns the same figure, computed once, since
    a step holding every ordered pair has the same links under every order.

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> from rankopt.models.schedule import schedule
    >>> net = make_network(np.full((4, 4), 1e-6), bandwidth=1e9, nbytes=4e6)
    >>> m = ConcurrentTime(schedule("alltoall", "linear", 4), net, "time")
    >>> round(m.cost(np.arange(4)) * 1e6, 6)  # a + (p-1) n/(pB), in us
    3001.0
    """

    def __init__(self, sched: Schedule, net: NetworkArrays, objective: str) -> None:
        self.schedule = sched
        self.network = net
        self.n = sched.n
        self.objective = objective
        if int(sched.step_ptr[1]) != self.n * (self.n - 1):  # order-free for all pairs only
            raise AssertionError("ConcurrentTime prices a step of every ordered pair")
        self._cost = concurrent_time(sched, net, np.arange(self.n, dtype=np.int64), objective)
        self.capabilities = Capabilities(
            rotation_invariant=True,
            directed=False,
            latency=net.latency,
            bandwidth=net.bandwidth,
            nbytes=net.nbytes,
        )

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return concurrent_time(self.schedule, self.network, order, self.objective)

    def cost(self, order: NDArray[np.int64]) -> float:
        return self._cost

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.full(len(orders), self._cost, dtype=np.float64)

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        return 0.0

    def swap_deltas(
        self, order: NDArray[np.int64], pairs: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        return np.zeros(len(pairs), dtype=np.float64)
