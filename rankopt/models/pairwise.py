"""Pairwise all-to-all under ``"time"``: a compiled evaluator for its n - 1 steps.

Step ``s`` pairs rank ``k`` with ``k ^ s`` (``n`` a power of two) or sends
from ``k`` to ``(k + s) % n``, every transfer carrying ``nbytes / n``. The
kernel (``src_ext/_pairwise_eval.pyx``) scans the order-permuted transfer
time matrix row by row for the full cost (``O(n^2)``, half of it for
exchanges), and keeps each step's largest transfers so that a swap delta is
``O(n)`` (two rows of the matrix) instead of ``O(n^2)``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt.models.network import NetworkArrays
from rankopt.models.schedule import Schedule
from rankopt.models.step import StepModel, _as_order

_pairwise_eval = require_extension("rankopt.models._pairwise_eval")

__all__ = ["PairwiseTime", "transfer_times"]


def transfer_times(net: NetworkArrays, frac: float) -> NDArray[np.float64]:
    """``T[a, b]``: time of a ``frac * nbytes`` transfer from ``a`` to ``b`` (no uplinks).

    Computed as the reference does: ``latency + frac * nbytes / bandwidth``.
    """
    if not net.has_rate or net.bandwidth is None:
        return net.latency.copy()
    return net.latency + (float(frac) * float(net.nbytes)) / net.bandwidth  # type: ignore[arg-type,operator]


class PairwiseTime(StepModel):
    """α-β model of pairwise all-to-all (no uplinks) with a dedicated kernel.

    :attr:`evaluator` is the generic ``StepEval``;
    :meth:`cost`, :meth:`batch_cost`, :meth:`swap_delta` and
    :meth:`swap_deltas` use :attr:`fast`.

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> from rankopt.models.schedule import schedule
    >>> net = make_network(np.full((4, 4), 1e-6), bandwidth=1e9, nbytes=4e6)
    >>> m = PairwiseTime(schedule("alltoall", "pairwise", 4), net, "time")
    >>> round(m.cost(np.arange(4)) * 1e6, 6)  # (p-1)(a + n/(pB)), in us
    3003.0
    """

    def __init__(self, sched: Schedule, net: NetworkArrays, objective: str) -> None:
        super().__init__(sched, net, objective)
        n = sched.n
        xor = n & (n - 1) == 0
        t = transfer_times(net, float(sched.frac[0]))
        if xor:
            t = np.maximum(t, t.T)
        t = np.ascontiguousarray(t)
        # the transpose serves transfers into a rank; symmetric for exchanges
        self.fast = _pairwise_eval.PairwiseEval(t, t if xor else np.ascontiguousarray(t.T), xor)
        # no compiled swap search: the generic kernel's deltas rescan O(n)
        # steps in full, the search through swap_delta below is faster
        self.capabilities = replace(self.capabilities, swap_search=None)

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(self.fast.cost(_as_order(order)))

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.fast.batch_cost(np.ascontiguousarray(orders, dtype=np.int64))

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        return self.fast.swap_delta(_as_order(order), i, j)

    def swap_deltas(
        self, order: NDArray[np.int64], pairs: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        return self.fast.swap_deltas(_as_order(order), np.ascontiguousarray(pairs, dtype=np.int64))
