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
from rankopt.models.base import Capabilities, CostModel

_ring_eval = require_extension("rankopt.models._ring_eval")

__all__ = [
    "RingSum",
    "RingBottleneck",
    "ring_edges_reference",
    "ring_sum_reference",
    "ring_bottleneck_reference",
]


def ring_edges_reference(
    latency: NDArray[np.floating], order: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Weights of the ring's directed edges ``order[k] -> order[k+1]``."""
    order = np.asarray(order)
    return np.array(
        [latency[order[k], order[(k + 1) % len(order)]] for k in range(len(order))],
        dtype=np.float64,
    )


def ring_sum_reference(latency: NDArray[np.floating], order: NDArray[np.int64]) -> float:
    """Sum of the ring's edge latencies (the spec of ``objective="sum"``)."""
    return float(sum(ring_edges_reference(latency, order).tolist()))


def ring_bottleneck_reference(latency: NDArray[np.floating], order: NDArray[np.int64]) -> float:
    """Largest edge latency on the ring (the spec of ``objective="bottleneck"``)."""
    return float(max(ring_edges_reference(latency, order).tolist()))


def kernel_matrix(latency: NDArray[np.floating]) -> NDArray[np.floating]:
    """``latency`` as the ring kernels read it: float32 or float64, C order.

    The array itself when it already is one (float32 input is not widened);
    otherwise a float64 copy.
    """
    a = np.asarray(latency)
    if a.dtype in (np.float32, np.float64) and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a, dtype=np.float64)


class _RingModel(CostModel):
    """Ring objectives on a validated matrix (float32 or float64, C order).

    Symmetric input is searched as is; for asymmetric input the symmetric
    search runs on one extra (n, n) matrix in the input's dtype (the mean of
    both directions for ``sum``, their maximum for ``bottleneck``).
    Capabilities: rotation invariant, directed only for asymmetric input,
    ``ring`` = the objective over ``ring_matrix`` = the matrix itself.
    """

    _maximum = False  # how asymmetric input is symmetrised: mean, or max of both directions

    def __init__(self, latency: NDArray[np.floating]) -> None:
        self.latency = kernel_matrix(latency)
        self.n = self.latency.shape[0]
        self.symmetric = bool(_ring_eval.is_symmetric(self.latency))
        weights = (
            self.latency if self.symmetric else _ring_eval.symmetrize(self.latency, self._maximum)
        )
        self.capabilities = Capabilities(
            rotation_invariant=True,
            directed=not self.symmetric,
            ring=self.objective,
            ring_weights=weights,
            ring_matrix=self.latency,
            latency=self.latency,
        )


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

    For an asymmetric matrix the search uses ``max(latency, latency.T)`` (also
    its ``ring_weights``) and the final cost is that of the better direction.

    Examples
    --------
    >>> lat = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0]], float)
    >>> RingBottleneck(lat).cost(np.array([0, 1, 2]))
    5.0
    """

    objective = "bottleneck"

    _maximum = True

    def __init__(self, latency: NDArray[np.floating]) -> None:
        super().__init__(latency)
        weights = self.capabilities.ring_weights
        assert weights is not None
        self.max_weights: NDArray[np.floating] = weights

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        return ring_bottleneck_reference(self.latency, order)

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(_ring_eval.ring_max(self.latency, np.ascontiguousarray(order, dtype=np.int64)))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        o = np.asarray(orders, dtype=np.int64)
        return self.latency[o, np.roll(o, -1, axis=1)].max(axis=1)
