"""Pipelined chain broadcast under ``"time"``: step maxima of a sliding window.

At step ``t`` of the chain ``0 -> 1 -> ... -> n-1`` link ``k`` forwards
segment ``t - k``; the links that are busy form a window sliding right, so
the full cost is ``O(n + segments)`` with a monotonic deque
(``chain_cost`` in ``src_ext/_schedule_eval.pyx``) instead of one visit
per transfer. Swap deltas use the generic step evaluator.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rankopt.models.network import NetworkArrays
from rankopt.models.schedule import Schedule
from rankopt.models.step import StepModel, _as_order, _schedule_eval

__all__ = ["ChainTime"]


class ChainTime(StepModel):
    """α-β model of the pipelined chain broadcast (no uplinks).

    Examples
    --------
    >>> from rankopt.models.network import make_network
    >>> from rankopt.models.schedule import schedule
    >>> net = make_network(np.full((4, 4), 1e-6), bandwidth=1e9, nbytes=4e6)
    >>> m = ChainTime(schedule("broadcast", "chain", 4, nbytes=4e6, segment_size=1e6), net, "time")
    >>> round(m.cost(np.arange(4)) * 1e6, 6)  # (p - 2 + k)(a + s/B), in us
    6006.0
    """

    def __init__(self, sched: Schedule, net: NetworkArrays, objective: str) -> None:
        super().__init__(sched, net, objective)
        fr = sched.layout.block_frac
        fr = fr if isinstance(fr, tuple) else (float(fr),)
        self._nseg = len(fr)
        rate = net.has_rate and net.bandwidth is not None
        nb = float(net.nbytes) if rate else 0.0  # type: ignore[arg-type]
        self._c = (float(fr[0]) * nb, float(fr[-1]) * nb)
        self._bw = net.bandwidth if rate else np.zeros((1, 1))
        self._has_bw = bool(rate)

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(
            _schedule_eval.chain_cost(
                self.network.latency,
                self._bw,
                self._has_bw,
                self._c[0],
                self._c[1],
                _as_order(order),
                self._nseg,
            )
        )

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.array([self.cost(o) for o in np.asarray(orders)], dtype=np.float64)
