"""The one small interface through which solvers see a cost model.

Contents
--------
CostModel
    The modelled time of a collective under an order: ``cost``,
    ``batch_cost``, ``swap_delta`` and the slow ``reference_cost`` (the spec).
Capabilities
    What a model offers beyond those methods (ring weights, rotation
    invariance, a compiled swap search, ...), declared once by the model.
    Solvers read it and nothing else of a model's internals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["CostModel", "Capabilities", "RING_KINDS"]

#: The ring objectives a model can reduce to (:attr:`Capabilities.ring`).
RING_KINDS = ("sum", "bottleneck")


@dataclass(frozen=True, eq=False)
class Capabilities:
    """What a cost model offers its solvers, beyond ``cost`` and ``swap_delta``.

    A model declares this once (class or instance attribute
    ``capabilities``); solvers choose their moves, starts and kernels from it
    and never inspect a model's type or attributes. The default, a model that
    offers nothing more, is searched by the generic methods.

    Attributes
    ----------
    rotation_invariant : bool
        The cost does not change when the order is rotated (rings). A method
        may then move process 0 under ``keep_rank0``: ``solve()`` rotates the
        order afterwards, at no cost.
    directed : bool
        The cost may change when the order is reversed. ``False`` promises
        that it does not (ring objectives on symmetric input).
    ring : {"sum", "bottleneck"} or None
        The ring objective the model reduces to: its cost is that objective
        of the ring's edge weights, or ``ring_weights`` are a proxy of it
        (see ``ring_matrix``). Ring methods (``two_opt``, ``ils``, ...) apply
        exactly when this is set.
    ring_weights : ndarray (n, n) or None
        Symmetric weights the ring kernels search (float32 or float64, C
        order): the matrix itself for symmetric input, a symmetrisation of it
        otherwise (mean of both directions for ``sum``, maximum for
        ``bottleneck``). Set exactly when ``ring`` is.
    ring_matrix : ndarray (n, n) or None
        The matrix whose directed ring objective ``ring`` *is* the cost, when
        it is one (exact dynamic programming, the bottleneck threshold
        search, the directed polish of an asymmetric sum). ``None`` when
        ``ring_weights`` are only a proxy (a mean over several networks).
    ring_schedule : bool
        The cost is that of a ring schedule whose steps are all alike: a
        short ring of per-edge step times is a good start.
    latency, bandwidth, nbytes
        The point-to-point network the cost is built from (seconds, bytes/s,
        bytes; ``bandwidth`` and ``nbytes`` may be ``None``), from which
        solvers build proxies of the cost: clustering distances, ring seeds.
        ``latency`` is ``None`` when the model has none to offer.
    swap_search : object or None
        A compiled first-improvement swap search on the model's own cost:
        ``swap_search.search(order, seed, max_moves, time_limit, keep_first,
        rel_tol) -> (moves, evaluations, stop)`` (stop 0: local optimum,
        1: time limit, 2: move budget), ``order`` updated in place, and the
        guided descent ``swap_search.guided(...)``
        (:class:`rankopt.models._swap_eval.SwapEval`); its ``incremental``
        says whether a delta costs only the two ranks' transfers, before and
        after accepted swaps. ``None`` when searching through
        :meth:`CostModel.swap_delta` is as fast or faster.
    proxy_search : object or None
        Where ``swap_search`` is not incremental, an incremental one on a
        proxy of the cost that bounds it from above (with a measured sharing
        exponent: the exponent on each shared uplink's own count,
        :attr:`rankopt.models.network.NetworkArrays.straggle`), for the guided
        descents of :mod:`rankopt.solvers.layout`, which price every order
        they keep with :meth:`CostModel.cost`.
    partners : tuple (ptr, idx, weight) or None
        The schedule's rank graph: new rank ``k`` exchanges ``weight`` (in
        units of ``nbytes``) with each new rank of ``idx[ptr[k]:ptr[k + 1]]``
        (:meth:`rankopt.models.schedule.Schedule.partners`). ``None`` when
        the cost is no fixed schedule.
    groups : tuple of ndarray
        The hierarchy the cost prices: the group of every process per level,
        finest first (``()`` when the cost sees no groups).
    uplinks : tuple (out, in) of ndarray or None
        The capacities of the groups' uplinks the cost prices, out of and into
        each group, ``(levels, G)`` each (bytes/s, ``inf`` pads), indexed like
        ``groups``: a transfer alone gets at most the smallest of its pair's
        ``bandwidth`` and the uplinks it leaves and enters (ring seeds weigh
        links by that). ``None`` when the cost shares no uplinks.
    traffic : scipy.sparse array (n, n) or None
        The point-to-point traffic the cost prices
        (:class:`rankopt.models.traffic.Traffic`): ``traffic.bytes[s, d]``
        between ranks, from which a mapper partitions the traffic graph into
        ``groups``. ``None`` when the cost has none.
    kernel : callable or None
        A Numba function ``kernel(latency, order) -> float`` that *is* the
        cost (with ``latency`` above, float64 C order): the annealing loop
        then runs in Numba.

    Examples
    --------
    >>> Capabilities().ring is None, Capabilities(rotation_invariant=True).directed
    (True, True)
    """

    rotation_invariant: bool = False
    directed: bool = True
    ring: str | None = None
    ring_weights: NDArray[np.floating] | None = None
    ring_matrix: NDArray[np.floating] | None = None
    ring_schedule: bool = False
    latency: NDArray[np.floating] | None = None
    bandwidth: NDArray[np.floating] | None = None
    nbytes: float | None = None
    swap_search: Any = None
    proxy_search: Any = None
    partners: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] | None = None
    groups: tuple[NDArray[np.int64], ...] = ()
    uplinks: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
    traffic: Any = None
    kernel: Callable[..., float] | None = None

    def __post_init__(self) -> None:
        if self.ring is not None and self.ring not in RING_KINDS:
            raise ValueError(f"`ring` must be one of {RING_KINDS} or None; got {self.ring!r}.")
        if (self.ring is None) != (self.ring_weights is None):
            raise ValueError("`ring` and `ring_weights` are declared together.")
        if self.ring_matrix is not None and self.ring is None:
            raise ValueError("`ring_matrix` needs `ring`.")
        if self.kernel is not None and self.latency is None:
            raise ValueError("`kernel` needs the `latency` it is called with.")

    @property
    def ring_sum_exact(self) -> bool:
        """Whether the cost is the directed ring sum over ``ring_matrix``."""
        return self.ring == "sum" and self.ring_matrix is not None


class CostModel(ABC):
    """Modelled time (seconds) of a collective under a rank order.

    Subclasses implement :meth:`reference_cost` (slow, obviously correct:
    the spec) and may override :meth:`cost`, :meth:`batch_cost` and
    :meth:`swap_delta` with faster, compiled versions that tests compare
    against the reference, and declare what else they offer in
    :attr:`capabilities`.

    Attributes
    ----------
    n : int
        Number of processes.
    objective : str
        Name of the objective (``"sum"``, ``"bottleneck"``, ``"time"``, ...).
    capabilities : Capabilities
        What the model offers its solvers (nothing beyond these methods by
        default).
    rotation_invariant : bool
        ``capabilities.rotation_invariant`` (read-only).
    ring_weights : ndarray or None
        ``capabilities.ring_weights`` (read-only).
    """

    n: int
    objective: str
    capabilities: Capabilities = Capabilities()

    @property
    def rotation_invariant(self) -> bool:
        """Whether cost is invariant under rotation of the order (rings)."""
        return self.capabilities.rotation_invariant

    @property
    def ring_weights(self) -> NDArray[np.floating] | None:
        """The symmetric weights ring kernels search, or ``None`` (see :class:`Capabilities`)."""
        return self.capabilities.ring_weights

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
