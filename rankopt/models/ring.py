"""Ring objectives: the ring's edge multiset decides the cost.

``sum``
    Sum of the one-way latencies along the ring, ``sum_k latency[order[k],
    order[k+1]]`` (indices mod n): the time a message takes to travel once
    around a pipelined ring -- the latency-bound regime. Minimising it is a
    (possibly asymmetric) travelling-salesman problem.
``bottleneck``
    The largest edge on the ring: in the step-synchronous model every one of
    the ring's ``2(n-1)`` allreduce steps lasts as long as its slowest link.
    Solvers break ties by the sum.

Edges are directed (rank k sends to rank k+1); both objectives are
invariant under rotation of the order, and under reversal for symmetric input.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt.models.base import CostModel

_ring_eval = require_extension("rankopt.models._ring_eval")

__all__ = [
    "RingSum",
    "RingBottleneck",
    "ring_edges_reference",
    "ring_sum_reference",
    "ring_bottleneck_reference",
]


def ring_edges_reference(
    latency: NDArray[np.float64], order: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Weights of the ring's directed edges ``order[k] -> order[k+1]``."""
    order = np.asarray(order)
    return np.array(
        [latency[order[k], order[(k + 1) % len(order)]] for k in range(len(order))],
        dtype=np.float64,
    )


def ring_sum_reference(latency: NDArray[np.float64], order: NDArray[np.int64]) -> float:
    """Sum of the ring's edge latencies (the spec of ``objective="sum"``)."""
    return float(sum(ring_edges_reference(latency, order).tolist()))


def ring_bottleneck_reference(latency: NDArray[np.float64], order: NDArray[np.int64]) -> float:
    """Largest edge latency on the ring (the spec of ``objective="bottleneck"``)."""
    return float(max(ring_edges_reference(latency, order).tolist()))


class _RingModel(CostModel):
    rotation_invariant = True

    def __init__(self, latency: NDArray[np.float64]) -> None:
        self.latency = np.ascontiguousarray(latency, dtype=np.float64)
        self.n = self.latency.shape[0]
        mean, mx, sym = _ring_eval.symmetrize(self.latency)
        self.symmetric = bool(sym)
        self.ring_weights = self.latency if self.symmetric else mean
        self._max_weights = self.latency if self.symmetric else mx


class RingSum(_RingModel):
    """``objective="sum"``: total one-way latency around the ring.

    Examples
    --------
    >>> lat = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0]], float)
    >>> RingSum(lat).cost(np.array([0, 1, 2]))
    8.0
    """

    objective = "sum"

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return ring_sum_reference(self.latency, order)

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(_ring_eval.ring_sum(self.latency, np.ascontiguousarray(order, dtype=np.int64)))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return _ring_eval.ring_sum_batch(self.latency, np.ascontiguousarray(orders, dtype=np.int64))


class RingBottleneck(_RingModel):
    """``objective="bottleneck"``: the slowest link of the ring.

    For an asymmetric matrix the search uses ``max(latency, latency.T)`` and
    the final cost is that of the better direction.

    Examples
    --------
    >>> lat = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0]], float)
    >>> RingBottleneck(lat).cost(np.array([0, 1, 2]))
    5.0
    """

    objective = "bottleneck"

    def __init__(self, latency: NDArray[np.float64]) -> None:
        super().__init__(latency)
        self.max_weights = self._max_weights

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return ring_bottleneck_reference(self.latency, order)

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(_ring_eval.ring_max(self.latency, np.ascontiguousarray(order, dtype=np.int64)))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        o = np.asarray(orders, dtype=np.int64)
        return self.latency[o, np.roll(o, -1, axis=1)].max(axis=1)
