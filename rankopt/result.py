"""The result type shared by every solver method."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["SolveResult"]


def _fmt_seconds(x: float) -> str:
    ax = abs(x)
    if ax == 0 or ax >= 1:
        return f"{x:.4g} s"
    if ax >= 1e-3:
        return f"{x * 1e3:.4g} ms"
    if ax >= 1e-6:
        return f"{x * 1e6:.4g} us"
    return f"{x * 1e9:.4g} ns"


@dataclass(frozen=True, eq=False)
class SolveResult:
    """Outcome of :func:`rankopt.solve`.

    Attributes
    ----------
    order : ndarray of int64
        ``order[k]`` is the original rank of the process that gets new rank ``k``.
    rank_of : ndarray of int64
        Inverse of ``order``: the new rank of original process ``i``.
    cost : float
        Modelled cost of ``order`` (seconds for time models).
    baseline_cost : float
        Modelled cost of the launch order (identity).
    speedup : float
        ``baseline_cost / cost``.
    method, objective, collective, algorithm : str
        What was solved and how (``method`` is the method actually run, also
        when ``"auto"`` was asked for).
    iterations : int
        Improving moves (local search), kicks (ILS) or sweeps, per method.
    evaluations : int
        Cost or move-delta evaluations.
    runtime_s : float
        Wall time of the solve.
    stop_reason : str
        ``"optimal"``, ``"local_optimum"``, ``"max_iter"``, ``"time_limit"``, ...
    seed : int
        Pass as ``rng=seed`` to replay the run.
    history : tuple of (float, float)
        ``(seconds since start, best cost)`` pairs: the convergence curve.

    Examples
    --------
    >>> import rankopt, numpy as np
    >>> lat = np.array([[0, 1, 9, 1], [1, 0, 1, 9], [9, 1, 0, 1], [1, 9, 1, 0.]])
    >>> order, cost = rankopt.solve(lat[[0, 2, 1, 3]][:, [0, 2, 1, 3]], rng=0)
    >>> cost
    4.0
    """

    order: NDArray[np.int64]
    rank_of: NDArray[np.int64]
    cost: float
    baseline_cost: float
    speedup: float
    method: str
    objective: str
    collective: str
    algorithm: str
    iterations: int
    evaluations: int
    runtime_s: float
    stop_reason: str
    seed: int
    history: tuple[tuple[float, float], ...] = field(default=(), repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __iter__(self) -> Iterator[Any]:
        yield self.order
        yield self.cost

    def summary(self) -> str:
        """A few readable lines describing the result."""
        n = len(self.order)
        head = ", ".join(str(int(x)) for x in self.order[:16]) + (", ..." if n > 16 else "")
        unit = _fmt_seconds if self.objective not in ("qap",) else (lambda v: f"{v:.6g}")
        return "\n".join(
            [
                f"rankopt: {self.collective}/{self.algorithm}, objective={self.objective}, "
                f"n={n}, method={self.method}",
                f"  launch order cost : {unit(self.baseline_cost)}",
                f"  optimised cost    : {unit(self.cost)}",
                f"  speedup           : {self.speedup:.3f}x",
                f"  stop              : {self.stop_reason} after {self.iterations} iterations, "
                f"{self.evaluations} evaluations, {self.runtime_s * 1e3:.1f} ms (seed {self.seed})",
                f"  order             : [{head}]",
            ]
        )

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (lists and plain numbers)."""
        return {
            "order": [int(x) for x in self.order],
            "rank_of": [int(x) for x in self.rank_of],
            "cost": float(self.cost),
            "baseline_cost": float(self.baseline_cost),
            "speedup": float(self.speedup),
            "method": self.method,
            "objective": self.objective,
            "collective": self.collective,
            "algorithm": self.algorithm,
            "iterations": int(self.iterations),
            "evaluations": int(self.evaluations),
            "runtime_s": float(self.runtime_s),
            "stop_reason": self.stop_reason,
            "seed": int(self.seed),
        }
