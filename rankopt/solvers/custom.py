"""Custom objectives: annealing a user's Numba function entirely in Numba.

``solve(latency, objective=f)`` wraps ``f`` in
:class:`rankopt.models.custom.CustomModel` (re-exported here). When ``f``
is a Numba ``@njit`` function ``(latency, order) -> float`` the model
declares it as its ``kernel``, and ``anneal`` runs :func:`anneal_custom`:
swap and insert moves, each scored by a full re-evaluation of ``f``. A plain
Python callable also works, through the generic (slower) annealing loop.

The Numba loop (:mod:`rankopt.solvers._custom_kernels`) calls ``f``
through one function type, so it is compiled once and cached on disk; it is
loaded on first use, never at import.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.models.base import CostModel
from rankopt.models.custom import CustomModel, is_jitted
from rankopt.solvers._base import SolveContext, rank0_pinned
from rankopt.solvers._temperature import temperatures

__all__ = ["CustomModel", "anneal_custom", "is_jitted", "SLICE_S"]

#: Seconds of work per slice of the Numba loop (the time-limit granularity).
SLICE_S = 2e-3


def anneal_custom(
    model: CostModel,
    ctx: SolveContext,
    gen: np.random.Generator,
    start: NDArray[np.int64],
    budget: Any,
    iters: int,
) -> NDArray[np.int64]:
    """Anneal a model whose cost is a Numba ``kernel`` with swap and insert moves.

    One geometric schedule from ``t0`` to ``t1`` over ``iters`` proposals, run
    in slices of about ``SLICE_S`` seconds (their length adapts to the
    measured speed) so that ``time_limit`` is read often; the slicing does
    not change the moves. Used by ``anneal`` when
    ``model.capabilities.kernel`` is set.
    """
    from rankopt.solvers import _custom_kernels  # imports Numba: first use only

    caps = model.capabilities
    f, lat = caps.kernel, caps.latency
    assert f is not None and lat is not None
    lo = 1 if rank0_pinned(model, ctx) else 0
    order = np.ascontiguousarray(start, dtype=np.int64).copy()
    if model.n - lo < 2:
        return order
    count = int(min(200, max(iters // 10, 10)))
    deltas = np.asarray(
        _custom_kernels.sample_swaps(f, lat, order, lo, count, int(gen.integers(1, 2**63 - 1)))
    )
    if not np.isfinite(deltas).all():
        model.cost(order)  # names the start when it is the non-finite one
        raise RankoptInputError(
            f"`objective` must return a finite number; {model.objective}(latency, order) "
            f"returned nan or inf for an order one swap away from {order.tolist()}."
        )
    t0, t1 = temperatures(deltas)
    factor = (t1 / t0) ** (1.0 / iters) if t0 > 0.0 and iters > 0 else 0.0
    state = np.array([gen.integers(1, 2**63 - 1)], dtype=np.uint64)
    cur = float(model.cost(order))
    best = order.copy()
    best_cost = cur
    temp = t0
    every = max(iters // 20, 1)
    size = 1
    done = 0
    next_report = every
    while done < iters:
        step = min(size, iters - done)
        tic = time.perf_counter()
        cur, temp, best_cost, _ = _custom_kernels.run(
            f, lat, order, lo, step, temp, factor, state, cur, best, best_cost
        )
        took = time.perf_counter() - tic
        done += step
        if took < 0.5 * SLICE_S:
            size *= 2
        elif took > 2 * SLICE_S and size > 1:
            size //= 2
        if done >= next_report or done == iters:
            ctx.record(best_cost, budget.iterations + done)
            next_report = done + every
        if ctx.out_of_time():
            budget.stop = "time_limit"
            break
    budget.spend(count + done, done)
    return best
