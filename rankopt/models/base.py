"""The one small interface through which solvers see a cost model."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import NDArray

__all__ = ["CostModel"]


class CostModel(ABC):
    """Modelled time (seconds) of a collective under a rank order.

    Subclasses implement :meth:`reference_cost` (slow, obviously correct:
    the spec) and may override :meth:`cost`, :meth:`batch_cost` and
    :meth:`swap_delta` with faster, compiled versions that tests compare
    against the reference.

    Attributes
    ----------
    n : int
        Number of processes.
    objective : str
        Name of the objective (``"sum"``, ``"bottleneck"``, ``"time"``, ...).
    ring_weights : ndarray or None
        For models that are a ring sum over fixed edge weights: the symmetric
        weight matrix (ring kernels then apply; float32 or float64). ``None``
        otherwise.
    """

    n: int
    objective: str
    ring_weights: NDArray[np.floating] | None = None
    #: Whether cost is invariant under rotation of the order (rings).
    rotation_invariant: bool = False

    @abstractmethod
    def reference_cost(self, order: NDArray[np.int64]) -> float:
        """Cost of ``order`` computed the slow, obviously correct way."""

    def cost(self, order: NDArray[np.int64]) -> float:
        """Cost of ``order`` (fast path; equals :meth:`reference_cost`)."""
        return self.reference_cost(order)

    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]:
        """Costs of many orders, one per row."""
        return np.array([self.cost(o) for o in orders], dtype=np.float64)

    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float:
        """Cost change when the processes at new ranks ``i`` and ``j`` swap."""
        new = order.copy()
        new[i], new[j] = new[j], new[i]
        return self.cost(new) - self.cost(order)
