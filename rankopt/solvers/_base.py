"""What every solver method receives and returns, and the method registry."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from rankopt.models.base import CostModel

__all__ = [
    "SolveContext",
    "MethodOutput",
    "METHODS",
    "Method",
    "STOP_REASONS",
    "register",
    "check_method_options",
    "method_options",
    "show_options",
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

#: Why a method stopped (``MethodOutput.stop_reason``, ``SolveResult.stop_reason``):
#: a closed set, so that callers can branch on it.
STOP_REASONS = frozenset(
    {
        "optimal",  # an exact method proved it
        "constructed",  # a construction, no search
        "local_optimum",  # no improving move left
        "threshold_converged",  # the bottleneck's threshold search closed
        "max_iter",  # the iteration budget
        "max_evals",  # the evaluation budget
        "time_limit",  # the wall-clock guard
        "launch_order_kept",  # nothing beat the launch order (set by solve())
        "contiguous_order_kept",  # a HierarchicalNetwork's contiguous order won (solve())
    }
)


class Method(NamedTuple):
    """One registered method: what :data:`METHODS` maps a name to."""

    fn: MethodFn
    options: tuple[str, ...]
    doc: str
    delegates: bool = False  # picks another method and passes it its options (auto)


#: name -> :class:`Method` (function, option names it accepts, one-line description)
METHODS: dict[str, Method] = {}


def register(
    name: str,
    options: tuple[str, ...] = (),
    doc: str = "",
    *,
    delegates: bool = False,
    replace: bool = False,
) -> Callable[[MethodFn], MethodFn]:
    """Decorator adding a method to the registry behind ``solve(method=name)``.

    ``doc`` is its one line in :func:`show_options` and ``rankopt compare``;
    a method that ``delegates`` (``auto``) accepts every option of the
    methods it may pick. Like :func:`rankopt.engines.register`, a second
    method under a taken name is refused unless ``replace``.
    """

    def deco(fn: MethodFn) -> MethodFn:
        old = METHODS.get(name)
        if old is not None and not replace and old.fn is not fn:
            raise ValueError(
                f"a method called {name!r} is registered already ({old.fn.__module__}."
                f"{old.fn.__qualname__}); pass replace=True to replace it."
            )
        METHODS[name] = Method(fn, tuple(options), doc, delegates)
        return fn

    return deco


def method_options(method: str) -> tuple[str, ...]:
    """The options ``solve(method=method, options=...)`` accepts, sorted.

    A method that delegates (``auto``) accepts those of every other method.
    """
    entry = METHODS[method]
    if not entry.delegates:
        return tuple(sorted(entry.options))
    return tuple(sorted({o for m in METHODS.values() if not m.delegates for o in m.options}))


def show_options(method: str | None = None) -> str:
    """Every method (or one) with its description and the options it accepts.

    In the manner of :func:`scipy.optimize.show_options`; the options are
    described in each method's documentation (``help(rankopt.solve)``).

    >>> print(show_options("ils"))
    ils: 2-opt/Or-opt + Or-3opt kicks
        options: candidates, neighbors, window
    """
    names = sorted(METHODS) if method is None else [method]
    if method is not None and method not in METHODS:
        raise ValueError(
            f"`method` must be one of {', '.join(map(repr, sorted(METHODS)))}; got {method!r}."
        )
    lines = []
    for name in names:
        opts = method_options(name)
        lines.append(f"{name}: {METHODS[name].doc}")
        lines.append(f"    options: {', '.join(opts) if opts else 'none'}")
    return "\n".join(lines)


def check_method_options(method: str, options: Mapping[str, Any]) -> None:
    """Unknown options are an error (a typo must not silently run defaults)."""
    allowed = method_options(method)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(
            f"method {method!r} got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(map(repr, allowed)) or 'none'}."
        )
