"""The annealing temperature schedule, shared by the Python, ring and Numba loops.

``t0`` makes an average uphill move from the start order accepted with
probability ``ACCEPT_START`` (the start is a construction, not a random
order, so the search need not melt it); ``t1`` makes the smallest uphill
moves (10th percentile) accepted with probability ``ACCEPT_END``. Both come
from move deltas sampled at the start; the loops cool geometrically from
``t0`` to ``t1`` over their proposals.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["temperatures", "ACCEPT_START", "ACCEPT_END"]

ACCEPT_START = 0.2
ACCEPT_END = 1e-3


def temperatures(deltas: NDArray[np.float64], p_start: float = ACCEPT_START) -> tuple[float, float]:
    """Start and end temperature from sampled move deltas (see module docstring).

    Examples
    --------
    >>> t0, t1 = temperatures(np.array([-1.0, 1.0, 2.0, 3.0]))
    >>> round(t0, 3), t1 < t0
    (1.243, True)
    """
    up = deltas[deltas > 0]
    if len(up) == 0:
        return 0.0, 0.0
    t0 = float(up.mean()) / -math.log(p_start)
    t1 = float(np.percentile(up, 10)) / -math.log(ACCEPT_END)
    return t0, min(t1, t0)
