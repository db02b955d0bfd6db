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

Under ``time_limit`` the stages are sized to the time left, not to the
iteration budget: the speed of the sampled moves gives the proposals that
fit (at most the budget), and once the loop has run ``REPLAN_S`` its
measured speed resizes what is left (the anneal's cooling factor with it,
so that it still ends at ``t1``). Sized to the budget, a limit shorter
than the first descent ended inside it and the anneal never ran
(figures: docs/results/benchmarks.md, "Custom objectives").

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
#: Under ``time_limit``: the most of the time left that sampling may take.
SAMPLE_SHARE = 0.1
#: Under ``time_limit``: seconds in the loop before its measured speed resizes the stages.
REPLAN_S = 10 * SLICE_S


def near_nodes(
    latency: NDArray[np.floating[Any]], k: int, gen: np.random.Generator
) -> NDArray[np.int64]:
    """The ``k`` nearest other nodes of every node, by symmetrised latency (ties in random order).

    Nearest first; ties are broken by random keys (no bias to low indices).
    A partial sort (``argpartition``) finds each row's ``k`` nearest, and
    only they are sorted, by distance then key; a row where a tie straddles
    the ``k``-th place is sorted in full (all rows, when a quarter of them
    are: a hierarchy). Same result as a full ``lexsort`` of the n x n
    distances under the keys, in a third of its time on a 256-node cloud
    (no ties).

    Examples
    --------
    >>> lat = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 4.0], [5.0, 4.0, 0.0]])
    >>> near_nodes(lat, 1, np.random.default_rng(0)).tolist()
    [[1], [0], [1]]
    """
    n = latency.shape[0]
    k = min(k, n - 1)
    d = latency + latency.T
    keys = gen.permutation(n * n).reshape(n, n)  # tie-break: no bias to low indices
    np.fill_diagonal(d, np.inf)
    part = np.argpartition(d, k - 1, axis=1)[:, :k]
    near = np.take_along_axis(d, part, axis=1)
    tied = np.flatnonzero((d <= near.max(axis=1)[:, None]).sum(axis=1) > k)
    if len(tied) > n // 4:  # a hierarchy: sort in full
        return np.ascontiguousarray(np.lexsort((keys, d), axis=1)[:, :k], dtype=np.int64)
    first = np.lexsort((np.take_along_axis(keys, part, axis=1), near), axis=1)
    out = np.take_along_axis(part, first, axis=1)
    if len(tied):  # which of the tied nodes make the cut is up to the keys
        out[tied] = np.lexsort((keys[tied], d[tied]), axis=1)[:, :k]
    return np.ascontiguousarray(out, dtype=np.int64)


def _stage_lengths(total: int, anneal: bool) -> list[int]:
    """Proposals of each stage: descent, anneal, descent (or one descent)."""
    if not anneal:
        return [total]
    descent = int(total * DESCENT)
    return [descent, total - 2 * descent, descent]


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
    not change the moves. Under ``time_limit`` the stages are sized to the
    proposals that fit in the time left (at most ``iters``), from the
    speed of the sampled moves, and resized after each slice when the
    measured speed says otherwise (the anneal's cooling factor with them,
    so that it still ends at ``t1``). Used by ``anneal`` when
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
    limited = ctx.time_limit is not None
    tic = time.perf_counter()
    best_cost = float(model.cost(order))  # names the start when it is not finite
    per_eval = max(time.perf_counter() - tic, 1e-9)  # a first measure of the speed
    nbr = near_nodes(lat, NEIGHBORS, gen)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    state = np.array([gen.integers(1, 2**63 - 1)], dtype=np.uint64)
    count = int(min(SAMPLES, max(iters // 10, 10)))
    if limited:  # sampling takes at most SAMPLE_SHARE of the time left
        count = int(min(count, max(SAMPLE_SHARE * ctx.remaining() / per_eval, 1)))
    tic = time.perf_counter()
    deltas = np.asarray(
        _custom_kernels.sample_swaps(f, lat, order, pos, nbr, lo, count, NEAR, state)
    )
    per_eval = max(time.perf_counter() - tic, 1e-9) / (count + 1)
    if not np.isfinite(deltas).all():
        raise RankoptInputError(
            f"`objective` must return a finite number; {model.objective}(latency, order) "
            f"returned nan or inf for an order one swap away from {order.tolist()}."
        )
    t0, t1 = temperatures(deltas)
    best = order.copy()
    total = iters
    if limited:
        total = int(min(iters, max((ctx.remaining() - SLICE_S) / per_eval, 1)))
    lengths = _stage_lengths(total, t0 > 0.0)
    temps = [(0.0, 0.0), (t0, t1), (0.0, 0.0)] if t0 > 0.0 else [(0.0, 0.0)]
    every = max(total // 20, 1)
    size = 1
    done = 0
    spent = 0.0  # seconds in the Numba loop
    next_report = every
    for k, (t_start, t_end) in enumerate(temps):
        left = lengths[k]
        if left <= 0:
            continue
        order[:] = best
        pos[order] = np.arange(n)
        cur = best_cost
        temp = t_start
        factor = (t_end / t_start) ** (1.0 / left) if t_start > 0.0 else 0.0
        while left > 0:
            step = min(size, left)
            tic = time.perf_counter()
            cur, temp, best_cost, _ = _custom_kernels.run(
                f, lat, order, pos, nbr, lo, step, temp, factor, NEAR, state, cur, best, best_cost
            )
            took = time.perf_counter() - tic
            spent += took
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
            need = left + sum(lengths[k + 1 :])
            if limited and spent >= REPLAN_S and need > 0:  # fit the rest to the time left
                fit = (ctx.remaining() - SLICE_S) * done / spent
                target = int(min(iters - done, max(fit, 0)))
                if abs(target - need) > 0.1 * need:
                    left = int(left * target / need)
                    lengths[k + 1 :] = [int(m * target / need) for m in lengths[k + 1 :]]
                    if t_start > 0.0 and left > 0:
                        factor = (t_end / temp) ** (1.0 / left)
    if limited and done < iters:
        budget.stop = "time_limit"
    budget.spend(count + done, done)
    return best
