"""Generic local search for every cost model: first-improvement pairwise swaps.

``swap``
    Start from ``init`` (or the identity order, which is the launch order
    every speedup is measured against), then sweep: for each new rank ``i``
    (cyclically, from a random start) try swapping it with every ``j`` (from a
    random offset) and apply the first swap that lowers the cost by more than
    ``1e-12`` times the start cost. Stop at a local optimum (a sweep of all ``i`` with
    no improving swap), after ``max_iter`` applied swaps, or at
    ``time_limit``. ``keep_rank0`` on a model that is not rotation invariant
    keeps position 0 out of every swap (:func:`rankopt.solvers._base.rank0_pinned`;
    the start is fixed up first).

Models that declare a compiled ``swap_search``
(:class:`~rankopt.models.base.Capabilities`; the step models) run the whole
search in the kernel with incremental swap deltas; the others (among them
pairwise all-to-all, whose dedicated ``swap_delta`` outruns the generic
kernel) are searched in Python through :meth:`CostModel.swap_delta`.
"""

from __future__ import annotations

import numpy as np

from rankopt._rng import kernel_seed
from rankopt.models.base import CostModel
from rankopt.order import identity
from rankopt.solvers._base import MethodOutput, SolveContext, fix_first, rank0_pinned, register

__all__ = ["swap"]

_STOP = {0: "local_optimum", 1: "time_limit", 2: "max_iter"}
_REL_TOL = 1e-12


def _python_search(
    model: CostModel, ctx: SolveContext, order: np.ndarray, pinned: bool
) -> tuple[int, int, str]:
    n = model.n
    lo = 1 if pinned else 0
    m = n - lo
    if m < 2:
        return 0, 0, "local_optimum"
    cost = model.cost(order)
    # relative to the start cost, a fixed scale: the running cost drifts by
    # rounding, and a threshold at or below zero accepts zero-change swaps for ever
    tol = _REL_TOL * cost
    if tol <= 0:
        return 0, 0, "local_optimum"  # costs are non-negative: nothing is below zero
    moves = evals = since = 0
    i = int(ctx.gen.integers(m))
    while True:
        r = int(ctx.gen.integers(m))
        for jj in range(m):
            j = lo + (r + jj) % m
            if j == lo + i:
                continue
            d = model.swap_delta(order, lo + i, j)
            evals += 1
            if d < -tol:
                order[lo + i], order[j] = order[j], order[lo + i]
                cost += d
                moves += 1
                since = 0
                ctx.record(cost, moves)
                break
        since += 1
        if since > m:
            return moves, evals, "local_optimum"
        if ctx.max_iter is not None and moves >= ctx.max_iter:
            return moves, evals, "max_iter"
        if ctx.out_of_time():
            return moves, evals, "time_limit"
        i = (i + 1) % m


@register("swap", doc="first-improvement pairwise swaps (any model)")
def swap(model: CostModel, ctx: SolveContext) -> MethodOutput:
    order = np.array(ctx.init if ctx.init is not None else identity(model.n), dtype=np.int64)
    pinned = rank0_pinned(model, ctx)
    if pinned and order[0] != 0:
        order = fix_first(order)
    ctx.record(model.cost(order), 0)
    search = model.capabilities.swap_search
    if search is not None:
        moves, evals, st = search.search(
            order,
            kernel_seed(ctx.gen),
            int(ctx.max_iter or 0),
            float(ctx.remaining()),
            pinned,
            _REL_TOL,
        )
        stop = _STOP[st]
    else:
        moves, evals, stop = _python_search(model, ctx, order, pinned)
    ctx.record(model.cost(order), moves)
    return MethodOutput(order, iterations=moves, evaluations=evals, stop_reason=stop)
