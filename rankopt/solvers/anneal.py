"""Simulated annealing, generic over every cost model.

``anneal``
    Metropolis search with a geometric temperature schedule.

    * Ring models with edge weights (``objective="sum"``): 2-opt, Or-opt
      (runs of 1-3, either orientation) and swap moves proposed around
      k-nearest-neighbour candidates, scored by O(1) deltas in the compiled
      kernel ``src_ext/_anneal_ring.pyx``; the result is polished by 2-opt /
      Or-opt local search.
    * Every other model (step-based algorithms, ring ``bottleneck``, custom
      objectives): swap moves scored by ``model.swap_delta`` and insert moves
      (one process moves to another rank, the ranks in between shift) scored
      by a full ``model.cost``. Models whose cost is a Numba ``kernel``
      (custom objectives) run the whole loop in Numba, as a descent, one
      anneal and a closing descent, a quarter of the swaps between nearby
      nodes (:mod:`rankopt.solvers.custom`).

Which loop runs is read from the model's
:class:`~rankopt.models.base.Capabilities`: ``ring == "sum"`` (with its
``ring_weights``), ``kernel``, or neither.

Temperature (:func:`rankopt.solvers._temperature.temperatures`): ``t0``
makes an average uphill move from the start order accepted with probability
0.2 (the start is a construction, not a random order, so the search need
not melt it); ``t1`` makes the smallest uphill moves (10th percentile)
accepted with probability 1e-3. Both come from deltas sampled at the start.

Budgets: ``max_iter`` (proposals per start) and ``options={"max_evals": m}``
(cost or delta evaluations, all starts together) are reproducible;
``time_limit`` is a guard. ``options={"starts": k}`` runs k independent
starts with generators from ``Generator.spawn`` and keeps the best
(default: :func:`default_starts`; the first start is the one a single-start
run makes, so more starts are never worse).

    Rings of fewer than ``RING_KERNEL_MIN_N`` processes take the generic loop:
    the ring kernel's moves cannot change a 3-ring, and at n = 4 the few
    distinct rings are better searched by swaps on the directed cost.

Start order: ``init`` when given; otherwise nearest neighbour for rings and
the greedy-cluster order (:mod:`rankopt.solvers.greedy`) for other models,
or the launch order when that is cheaper. The result is never worse than the
start. With ``keep_rank0`` and a model that is not rotation invariant,
position 0 never moves (the start is fixed up first:
:func:`rankopt.solvers._base.rank0_pinned`).

``time_limit`` is read every few milliseconds of work: the compiled ring
loop adapts the number of proposals between clock reads to their speed, the
Python loop reads the clock after every proposal, and the Numba loop runs in
slices whose length adapts to their measured time. Where the loop stops is
the only thing the clock decides: with the same seed, a run that is not cut
short makes the same moves.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt._rng import kernel_seed
from rankopt._validation import check_positive
from rankopt.models.base import CostModel
from rankopt.solvers._base import (
    MethodOutput,
    SolveContext,
    fix_first,
    no_worse_than_start,
    rank0_pinned,
    register,
)
from rankopt.solvers._temperature import ACCEPT_END, ACCEPT_START, temperatures
from rankopt.solvers.custom import anneal_custom
from rankopt.solvers.greedy import greedy_order
from rankopt.solvers.ring import best_direction, ring_seed

_anneal_ring = require_extension("rankopt.solvers._anneal_ring")
_ring_search = require_extension("rankopt.solvers._ring_search")

__all__ = [
    "anneal",
    "default_iterations",
    "default_starts",
    "temperatures",
    "RING_KERNEL_MIN_N",
    "ACCEPT_START",
    "ACCEPT_END",
]

#: Smallest n annealed by the compiled ring kernel; smaller rings take the generic loop.
RING_KERNEL_MIN_N = 5
_SAMPLES = 2000


def default_iterations(model: CostModel) -> int:
    """Proposals per start when ``max_iter`` is not given.

    Ring sums (O(1) deltas): ``clip(500 n, 50_000, 5_000_000)``; Numba
    kernels (custom objectives): ``clip(1000 n, 20_000, 1_000_000)``; ring
    schedules (``capabilities.ring_schedule``: the ring allreduce, allgather,
    reduce-scatter under the step models) above :data:`SMALL_N` processes:
    ``clip(10 n, 2_000, 40_000)``; other models: ``clip(50 n, 2_000, 200_000)``.

    A ring schedule starts from the best of three short rings (``ring_seed``).
    On 11 clouds of 64 to 1,024 processes (``synthetic_cloud``: two and three
    levels, 4 ranks a host or one, 0-30% congested VMs, sharing exponents 1-1.3)
    the 50 n proposals after it never priced an order below its start (a swap
    rarely lowers a step's slowest transfer), and they were half the solve:
    1.9-2.9 s of 3.5-5.1 s at n = 1,024. ``max_iter`` asks for more.
    """
    n = model.n
    caps = model.capabilities
    if caps.ring == "sum":
        return int(min(max(500 * n, 50_000), 5_000_000))
    if caps.kernel is not None:
        return int(min(max(1000 * n, 20_000), 1_000_000))
    if caps.ring_schedule and n > SMALL_N:
        return int(min(max(10 * n, 2_000), 40_000))
    return int(min(max(50 * n, 2_000), 200_000))


#: Starts of the generic swap/insert loop up to :data:`SMALL_N` processes.
SMALL_STARTS = 4
SMALL_N = 64


def default_starts(model: CostModel) -> int:
    """Independent starts when ``options["starts"]`` is not given.

    The generic loop (step-based algorithms, workloads, ring ``bottleneck``)
    on at most ``SMALL_N`` processes: ``SMALL_STARTS``. On 8 testbed-shaped
    networks (9-16 hosts in racks of uneven sizes, Rabenseifner at 1 and 16
    MiB, 2 seeds; ``bench/bench_solvers.py``, group ``starts``) one start
    missed the best order that eight found in 8 of 32 solves (up to 19%
    dearer), four starts in none, at 3-4x the time (0.13 s a solve).
    With ``options["max_evals"]`` (a reproducible budget): 1. Otherwise 1: the
    ring and Numba kernels' longer runs, and larger jobs, where a start costs more.
    """
    caps = model.capabilities
    if caps.ring == "sum" or caps.kernel is not None or model.n > SMALL_N:
        return 1
    return SMALL_STARTS


def _ring_kernel(model: CostModel) -> bool:
    """Whether ``model`` is annealed by the compiled ring kernel."""
    return model.capabilities.ring == "sum" and model.n >= RING_KERNEL_MIN_N


def _start_order(model: CostModel, ctx: SolveContext) -> tuple[NDArray[np.int64], int]:
    caps = model.capabilities
    if ctx.init is not None:
        order = np.array(ctx.init, dtype=np.int64)
        evals = 0
    elif caps.ring == "sum":
        assert caps.ring_weights is not None
        order = _ring_search.nearest_neighbor(caps.ring_weights, int(ctx.gen.integers(model.n)))
        order, _ = no_worse_than_start(model, ctx, order)
        evals = 2
    else:
        order, evals = greedy_order(model, ctx)  # already no worse than the launch order
        seed = ring_seed(model, ctx)  # ring schedules: a short ring beats the dendrogram order
        if seed is not None and model.cost(seed) < model.cost(order):
            order = seed
    if rank0_pinned(model, ctx) and order[0] != 0:
        order = fix_first(order)
    return order, evals


class _Budget:
    def __init__(self, ctx: SolveContext, model: CostModel) -> None:
        self.ctx = ctx
        self.iters = ctx.max_iter if ctx.max_iter is not None else default_iterations(model)
        m = ctx.options.get("max_evals")
        self.evals_left = None if m is None else check_positive(m, "max_evals", integer=True)
        starts = ctx.options.get("starts")
        if starts is None:
            starts = 1 if self.evals_left is not None else default_starts(model)
        self.starts = check_positive(starts, "starts", integer=True)
        self.k = check_positive(ctx.options.get("neighbors", 10), "neighbors", integer=True)
        self.evaluations = 0
        self.iterations = 0
        self.stop = "max_iter"

    def for_start(self, i: int) -> int:
        """Proposals for start i under the evaluation budget."""
        if self.evals_left is None:
            return self.iters
        share = self.evals_left // (self.starts - i)
        return int(min(self.iters, max(share, 0)))

    def spend(self, evals: int, iters: int) -> None:
        self.evaluations += evals
        self.iterations += iters
        if self.evals_left is not None:
            self.evals_left -= evals
            if self.evals_left <= 0:
                self.stop = "max_evals"


def _ring(
    model: CostModel,
    ctx: SolveContext,
    gen: np.random.Generator,
    start: NDArray[np.int64],
    budget: _Budget,
    iters: int,
) -> NDArray[np.int64]:
    w = model.capabilities.ring_weights
    assert w is not None
    tour = start.copy()
    nb = _ring_search.knn_lists(w, budget.k)
    deltas = _anneal_ring.sample_deltas(w, tour, nb, kernel_seed(gen), _SAMPLES)
    t0, t1 = temperatures(deltas)
    every = max(iters // 20, 1)
    base = model.cost(tour)

    def report(it: int, total: float) -> None:
        ctx.record(base + total, budget.iterations + it)

    _, ev, _, it, st = _anneal_ring.anneal(
        w, tour, nb, kernel_seed(gen), iters, t0, t1, ctx.remaining(), report, every
    )
    _, ev2, mv, _ = _ring_search.local_search(w, tour, nb, True, ctx.remaining())
    budget.spend(ev + ev2, it)
    if st == 1:
        budget.stop = "time_limit"
    return best_direction(model, tour)[0]


def _generic(
    model: CostModel,
    ctx: SolveContext,
    gen: np.random.Generator,
    start: NDArray[np.int64],
    budget: _Budget,
    iters: int,
) -> NDArray[np.int64]:
    """Swap (``swap_delta``) and insert (full cost) moves, Metropolis acceptance."""
    n = model.n
    lo = 1 if rank0_pinned(model, ctx) else 0
    order = start.copy()
    cur = float(model.cost(order))
    if n - lo < 2:
        return order
    m = n - lo
    sample = min(_SAMPLES // 10, max(iters // 10, 20))
    ii = gen.integers(lo, n, size=sample)
    jj = lo + (ii - lo + gen.integers(1, m, size=sample)) % m
    deltas = np.empty(sample)
    for t in range(sample):
        deltas[t] = model.swap_delta(order, int(ii[t]), int(jj[t]))
        if ctx.out_of_time():
            sample = t + 1
            break
    budget.spend(sample, 0)
    t0, t1 = temperatures(deltas[:sample])
    best, best_cost = order.copy(), cur
    temp = t0
    factor = (t1 / t0) ** (1.0 / iters) if t0 > 0 and iters > 0 else 0.0
    every = max(iters // 20, 1)
    evals = 0
    batch = 256
    it = 0
    while it < iters:
        size = min(batch, iters - it)
        ii = gen.integers(lo, n, size=size)
        jj = lo + (ii - lo + gen.integers(1, m, size=size)) % m
        uu = gen.random(size)
        kind = gen.random(size) < 0.2
        for t in range(size):
            i, j = int(ii[t]), int(jj[t])
            if kind[t] and m > 2:
                new = np.insert(np.delete(order, i), j, order[i])
                d = float(model.cost(new)) - cur
            else:
                new = None
                d = float(model.swap_delta(order, i, j))
            evals += 1
            temp *= factor
            if d <= 0.0 or (temp > 0.0 and uu[t] < math.exp(-d / temp)):
                if new is None:
                    order[i], order[j] = order[j], order[i]
                else:
                    order = new
                cur += d
                if cur < best_cost:
                    cur = float(model.cost(order))  # resynchronise: no drift in the best
                    if cur < best_cost:
                        best, best_cost = order.copy(), cur
            it += 1
            if it % every == 0:
                ctx.record(best_cost, budget.iterations + it)
            if ctx.out_of_time():  # a clock read costs far less than a proposal here
                break
        if ctx.out_of_time():
            budget.stop = "time_limit"
            break
        if budget.evals_left is not None and evals >= budget.evals_left:
            break
    budget.spend(evals, it)
    return best


@register(
    "anneal",
    options=("starts", "max_evals", "neighbors"),
    doc="simulated annealing, any model (ring moves or swap/insert)",
)
def anneal(model: CostModel, ctx: SolveContext) -> MethodOutput:
    """Simulated annealing (see the module docstring)."""
    budget = _Budget(ctx, model)
    start, ev0 = _start_order(model, ctx)
    budget.spend(ev0, 0)
    start_cost = float(model.cost(start))
    ctx.record(start_cost, 0)
    best, best_cost = start, start_cost
    ring = _ring_kernel(model)
    kernel = model.capabilities.kernel is not None
    for i, gen in enumerate(ctx.gen.spawn(budget.starts)):
        iters = budget.for_start(i)
        if iters <= 0 or ctx.out_of_time():
            break
        if kernel:
            order = anneal_custom(model, ctx, gen, start, budget, iters)
        elif ring:
            order = _ring(model, ctx, gen, start, budget, iters)
        else:
            order = _generic(model, ctx, gen, start, budget, iters)
        c = float(model.cost(order))
        if c < best_cost:
            best, best_cost = order, c
            ctx.record(c, budget.iterations)
    if ctx.out_of_time() and budget.stop == "max_iter":
        budget.stop = "time_limit"
    return MethodOutput(best, budget.iterations, budget.evaluations, budget.stop)
