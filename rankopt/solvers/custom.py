"""Custom objectives: annealing a user's Numba function entirely in Numba.

``solve(latency, objective=f)`` wraps ``f`` in
:class:`rankopt.models.custom.CustomModel` (re-exported here). When ``f``
is a Numba ``@njit`` function ``(latency, order) -> float`` the model
declares it as its ``kernel``, and ``anneal`` runs :func:`anneal_custom`
entirely in Numba. A plain Python callable also works, through the generic
(slower) annealing loop.

Moves: swaps, a quarter of them between the processes of two nearby nodes
(one of the ``NEIGHBORS`` nearest by latency, :func:`near_nodes`), the
others between any two positions; and inserts (one process moves, the ones
in between shift). Each is scored by a full re-evaluation of ``f`` (``f``
is a black box).

Schedule: a descent (temperature 0, ``DESCENT`` of the proposals), one
geometric anneal from ``t0`` to ``t1``
(:func:`rankopt.solvers._temperature.temperatures`, from swap deltas
sampled at the start), and a closing descent; each stage starts from the
best order found so far. Without the descents the anneal returned its
start unchanged on stencil traffic (a 16x16 grid on a synthetic cloud,
seeds 0-2): ``t0`` accepted about 70% of the proposals, the order melted to
4x the start's cost, and at ``t1`` it still accepted 4-6% of them and
ended 1.25x above the start, so the best order seen was the start, though
the start is not even a local optimum: a descent from it is 10% cheaper.
On those stencils the descents still do most of the work (the anneal
accepts 35% of its proposals and ends above the first descent's order); on
random traffic the anneal does (``bench/bench_custom_qap.py``).

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

__all__ = [
    "CustomModel",
    "anneal_custom",
    "is_jitted",
    "near_nodes",
    "SLICE_S",
]

#: Seconds of work per slice of the Numba loop (the time-limit granularity).
SLICE_S = 2e-3
#: Share of the proposals spent on each descent (temperature 0), before and after the anneal.
DESCENT = 0.05
#: Share of the swaps proposed between nearby nodes (:func:`near_nodes`).
NEAR = 0.25
#: Nearby nodes per node.
NEIGHBORS = 10
#: Move deltas sampled at the start to set the temperature.
SAMPLES = 200


def near_nodes(
    latency: NDArray[np.floating[Any]], k: int, gen: np.random.Generator
) -> NDArray[np.int64]:
    """The ``k`` nearest other nodes of every node, by symmetrised latency (ties in random order).

    Examples
    --------
    >>> lat = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 4.0], [5.0, 4.0, 0.0]])
    >>> near_nodes(lat, 1, np.random.default_rng(0)).tolist()
    [[1], [0], [1]]
    """
    n = latency.shape[0]
    d = latency + latency.T
    keys = gen.permutation(n * n).reshape(n, n)  # tie-break: no bias to low indices
    np.fill_diagonal(d, np.inf)
    idx = np.lexsort((keys, d), axis=1)
    return np.ascontiguousarray(idx[:, : min(k, n - 1)], dtype=np.int64)


def anneal_custom(
    model: CostModel,
    ctx: SolveContext,
    gen: np.random.Generator,
    start: NDArray[np.int64],
    budget: Any,
    iters: int,
) -> NDArray[np.int64]:
    """Anneal a model whose cost is a Numba ``kernel`` (see the module docstring).

    ``iters`` proposals in all: descent, anneal, descent. Every stage runs
    in slices of about ``SLICE_S`` seconds (their length adapts to the
    measured speed) so that ``time_limit`` is read often; the slicing does
    not change the moves. Used by ``anneal`` when
    ``model.capabilities.kernel`` is set.
    """
    from rankopt.solvers import _custom_kernels  # imports Numba: first use only

    caps = model.capabilities
    f, lat = caps.kernel, caps.latency
    assert f is not None and lat is not None
    n = model.n
    lo = 1 if rank0_pinned(model, ctx) else 0
    order = np.ascontiguousarray(start, dtype=np.int64).copy()
    if n - lo < 2:
        return order
    nbr = near_nodes(lat, NEIGHBORS, gen)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    state = np.array([gen.integers(1, 2**63 - 1)], dtype=np.uint64)
    count = int(min(SAMPLES, max(iters // 10, 10)))
    deltas = np.asarray(
        _custom_kernels.sample_swaps(f, lat, order, pos, nbr, lo, count, NEAR, state)
    )
    if not np.isfinite(deltas).all():
        model.cost(order)  # names the start when it is the non-finite one
        raise RankoptInputError(
            f"`objective` must return a finite number; {model.objective}(latency, order) "
            f"returned nan or inf for an order one swap away from {order.tolist()}."
        )
    t0, t1 = temperatures(deltas)
    best = order.copy()
    best_cost = float(model.cost(order))
    stages = [(iters, 0.0, 0.0)]  # no sampled move goes uphill: a descent
    if t0 > 0.0:
        descent = int(iters * DESCENT)
        stages = [(descent, 0.0, 0.0), (iters - 2 * descent, t0, t1), (descent, 0.0, 0.0)]
    every = max(iters // 20, 1)
    size = 1
    done = 0
    next_report = every
    for length, t_start, t_end in stages:
        if length <= 0:
            continue
        order[:] = best
        pos[order] = np.arange(n)
        cur = best_cost
        temp = t_start
        factor = (t_end / t_start) ** (1.0 / length) if t_start > 0.0 else 0.0
        left = length
        while left > 0:
            step = min(size, left)
            tic = time.perf_counter()
            cur, temp, best_cost, _ = _custom_kernels.run(
                f, lat, order, pos, nbr, lo, step, temp, factor, NEAR, state, cur, best, best_cost
            )
            took = time.perf_counter() - tic
            done += step
            left -= step
            if took < 0.5 * SLICE_S:
                size *= 2
            elif took > 2 * SLICE_S and size > 1:
                size //= 2
            if done >= next_report or done == iters:
                ctx.record(best_cost, budget.iterations + done)
                next_report = done + every
            if ctx.out_of_time():
                budget.stop = "time_limit"
                budget.spend(count + done, done)
                return best
    budget.spend(count + done, done)
    return best
