"""Custom objectives: a user's function of (latency, order) as a cost model.

``solve(latency, objective=f)`` wraps ``f`` in :class:`CustomModel`. When
``f`` is a Numba ``@njit`` function ``(latency, order) -> float``, the model
declares it as its ``kernel`` (:class:`~rankopt.models.base.Capabilities`)
and annealing runs entirely in Numba
(:func:`rankopt.solvers.custom.anneal_custom`). A plain Python callable
also works, through the generic (slower) solvers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.models.base import Capabilities, CostModel

__all__ = ["CustomModel", "is_jitted"]


def is_jitted(f: Any) -> bool:
    """Whether ``f`` is a Numba dispatcher (``@numba.njit``)."""
    return type(f).__module__.startswith("numba") and hasattr(f, "py_func")


class CustomModel(CostModel):
    """A cost model defined by a user's function ``f(latency, order) -> float``.

    Parameters
    ----------
    latency : ndarray (n, n)
        Validated matrix, passed to ``f`` as a float64 C-ordered array.
    f : callable
        ``f(latency, order)`` with ``order`` an int64 array; lower is better.
        It must return a finite real number: NaN or inf (no order can be
        compared with it) raises :class:`~rankopt.RankoptInputError` naming
        the order, wherever it is priced in Python (the start, every order of
        the generic loops, the result); the Numba annealing loop rejects such
        a move and checks its sampled moves.

    Notes
    -----
    Capabilities: the matrix (``latency``, for clustering starts) and, when
    ``f`` is jitted, ``kernel = f``. ``f`` is called with a read-only view
    of the matrix (as the Numba loop calls it), so that a jitted ``f`` is
    compiled for one array type only (a second type cost 0.16 s of the
    first solve of a 256-process QAP). Nothing is assumed of ``f``'s symmetries:
    not rotation invariant, directed.

    Examples
    --------
    >>> def ring(lat, order):
    ...     return float(sum(lat[order[k], order[(k + 1) % len(order)]] for k in range(len(order))))
    >>> m = CustomModel(np.array([[0.0, 1.0], [2.0, 0.0]]), ring)
    >>> m.cost(np.array([0, 1])), m.objective, m.capabilities.kernel is None
    (3.0, 'ring', True)
    """

    def __init__(self, latency: NDArray[np.float64], f: Callable[..., float]) -> None:
        self.latency = np.ascontiguousarray(latency, dtype=np.float64)
        # ``f`` always sees a read-only matrix: the type the Numba loop calls it with, so a
        # jitted ``f`` is compiled once (by the first cost), not again by the loop's first call
        self._readonly = self.latency.view()
        self._readonly.flags.writeable = False
        self.n = int(self.latency.shape[0])
        self.f = f
        self.jitted = is_jitted(f)
        self.objective = str(getattr(f, "__name__", "custom"))
        self.capabilities = Capabilities(latency=self.latency, kernel=f if self.jitted else None)

    def reference_cost(self, order: NDArray[np.int64]) -> float:
        order = np.ascontiguousarray(order, dtype=np.int64)
        value = self.f(self._readonly, order)
        try:
            c = float(value)
        except (TypeError, ValueError):
            raise RankoptInputError(
                f"`objective` must return a real number; {self.objective}(latency, order) "
                f"returned {value!r} ({type(value).__name__}) for order {order.tolist()}."
            ) from None
        if not math.isfinite(c):
            raise RankoptInputError(
                f"`objective` must return a finite number; {self.objective}(latency, order) "
                f"returned {c} for order {order.tolist()}."
            )
        return c
