"""What every solver method receives and returns, and the method registry."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt.models.base import CostModel

__all__ = [
    "SolveContext",
    "MethodOutput",
    "METHODS",
    "register",
    "check_method_options",
    "start_order",
    "no_worse_than_start",
    "rank0_pinned",
    "fix_first",
]


@dataclass
class SolveContext:
    """Budgets, randomness and reporting shared by all methods."""

    gen: np.random.Generator
    seed: int
    time_limit: float | None = None
    max_iter: int | None = None
    keep_rank0: bool = False
    callback: Callable[[dict[str, Any]], Any] | None = None
    init: NDArray[np.int64] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)
    history: list[tuple[float, float]] = field(default_factory=list)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        """Seconds left under ``time_limit`` (0.0 means no limit for kernels)."""
        if self.time_limit is None:
            return 0.0
        return max(self.time_limit - self.elapsed(), 1e-6)

    def out_of_time(self) -> bool:
        return self.time_limit is not None and self.elapsed() >= self.time_limit

    def record(self, cost: float, iteration: int = 0) -> None:
        """Add a point to the convergence history and report it."""
        t = self.elapsed()
        if not self.history or cost < self.history[-1][1]:
            self.history.append((t, float(cost)))
        if self.callback is not None:
            self.callback({"elapsed": t, "cost": float(cost), "iteration": iteration})


def rank0_pinned(model: CostModel, ctx: Any) -> bool:
    """Whether a method must keep process 0 at new rank 0 itself.

    The one meaning of ``keep_rank0`` inside the methods: on a model that is
    not rotation invariant position 0 is pinned (a method's start is fixed
    up with :func:`fix_first`, and no move touches position 0). On a rotation
    invariant model nothing is pinned: ``solve()`` rotates the method's order
    to put process 0 first, at no cost. (Exact enumeration also fixes
    process 0 at position 0 on rotation invariant models, as a symmetry.)
    """
    return bool(ctx.keep_rank0) and not model.capabilities.rotation_invariant


def fix_first(order: NDArray[np.int64], first: int = 0) -> NDArray[np.int64]:
    """A copy of ``order`` with process ``first`` swapped into new rank 0.

    Examples
    --------
    >>> fix_first(np.array([2, 1, 0, 3])).tolist()
    [0, 1, 2, 3]
    """
    out = np.array(order, dtype=np.int64)
    p = int(np.flatnonzero(out == first)[0])
    out[0], out[p] = out[p], out[0]
    return out


def start_order(ctx: SolveContext, n: int) -> NDArray[np.int64]:
    """The order a search starts from: ``init`` when given, else the launch order."""
    if ctx.init is not None:
        return np.array(ctx.init, dtype=np.int64)
    return np.arange(n, dtype=np.int64)


def no_worse_than_start(
    model: CostModel, ctx: SolveContext, order: NDArray[np.int64], cost: float | None = None
) -> tuple[NDArray[np.int64], float]:
    """``order``, or the start (:func:`start_order`) when that costs strictly less.

    A construction or a search on a proxy of the cost (symmetrised weights, a
    clustering distance) can end worse than where it began; every method
    returns the better of the two, and its cost. A start that breaks
    ``keep_rank0`` is not a candidate.
    """
    cost = float(model.cost(order)) if cost is None else float(cost)
    start = start_order(ctx, model.n)
    if rank0_pinned(model, ctx) and start[0] != 0:
        return order, cost
    start_cost = float(model.cost(start))
    if start_cost < cost:
        return start, start_cost
    return order, cost


@dataclass
class MethodOutput:
    order: NDArray[np.int64]
    iterations: int = 0
    evaluations: int = 0
    stop_reason: str = "local_optimum"
    method: str | None = None  # set when a method delegates (auto)


MethodFn = Callable[[CostModel, SolveContext], MethodOutput]

#: name -> (function, option names it accepts, one-line description)
METHODS: dict[str, tuple[MethodFn, tuple[str, ...], str]] = {}


def register(
    name: str, options: tuple[str, ...] = (), doc: str = ""
) -> Callable[[MethodFn], MethodFn]:
    """Decorator adding a method to the registry behind ``solve(method=name)``."""

    def deco(fn: MethodFn) -> MethodFn:
        METHODS[name] = (fn, options, doc)
        return fn

    return deco


def check_method_options(method: str, options: Mapping[str, Any]) -> None:
    """Unknown options are an error (a typo must not silently run defaults)."""
    allowed = METHODS[method][1]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(
            f"method {method!r} got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(map(repr, allowed)) or 'none'}."
        )
