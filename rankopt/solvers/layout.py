"""Group layouts and a guided swap descent: step schedules on hierarchical networks at scale.

``layout``
    For models whose cost is a schedule of steps priced on a network with
    groups -- the step models under ``"contention"`` and workloads of them,
    which declare a compiled ``swap_search``, their schedule's ``partners``
    and the ``groups`` they price (:class:`~rankopt.models.base.Capabilities`):

    1. **Layouts.** Orders that keep the hierarchy's groups together, each
       priced by the model itself:

       * *packed* (:func:`packed_order`): top-down, every group is cut into
         power-of-two pieces that sit on aligned blocks of new ranks, its
         subgroups packed into them the same way; recursive doubling /
         halving partners ``k ^ 2^b`` then stay inside the finest groups for
         as many low bits as the group sizes allow;
       * *contiguous*: every group one run of new ranks, coarsest level
         first, groups by label and, as a second layout, by size
         (largest first, the packing's alignment without its cuts);
       * on powers of two, each of these with the bits of the new rank
         reversed (schedules that move their largest pieces at the largest
         distance);
       * up to :data:`GREEDY_MAX_N` processes the greedy-cluster order
         (:mod:`rankopt.solvers.greedy`, what ``anneal`` starts from), up to
         :data:`ANNEAL_MAX_N` the ``anneal`` order itself (same seed: what
         ``auto`` returned before ``layout``; cheap there, and on some
         non-powers of two its basin is the better one), and the start
         (``init``, else the launch order).

    2. **Guided descent** from the best :data:`STARTS` distinct layouts,
       raced: each descends on ``1 / (RACE * STARTS)`` of the evaluation
       budget, then the cheapest of them goes on with the rest (a second
       start pays where its basin is the better one, up to 5% at 1,024
       processes and below, and costs a quarter of the budget where it is
       not; an even split spent half of it on the start that lost on both
       networks of 4,096 in ``bench/bench_solve_scale.py``). A start whose
       layout costs more than :data:`RACE_GAP` times the cheapest one does
       not race: its share is left unspent and the other starts take the
       seeds and shares they would have taken (on the synthetic clouds of
       the bench the second layout costs 100-400 times the first). The compiled
       swap descent ``swap_search.guided`` proposes swaps that put a process in the
       group of one of its partners, at a level drawn at random (partners
       drawn by the bytes they exchange), and applies every swap that lowers
       the cost, or keeps it and lowers the sum of squared uplink terms (a
       step's slowest uplink can only get faster once the ones level with
       it have). Its deltas are incremental and stay so after accepted
       swaps (``src_ext/_step_contention.pyx``: a swap revisits only the
       transfers of the two ranks and the uplinks they cross, in the steps
       stored once however often they repeat -- Rabenseifner's allgather
       replays its reduce-scatter).

    3. The cheapest order found, never worse than the start.

Budgets: ``options={"max_evals": m}`` or ``max_iter`` (model and swap
evaluations, all starts together; default :data:`EVALS_PER_RANK` per
process, at least :data:`MIN_EVALS`, at most :data:`MAX_EVALS`; with
``max_evals`` the ``anneal`` layout gets half) are reproducible;
``time_limit`` is a guard. A descent that finds no better swap in
:data:`PATIENCE` evaluations per process has stalled: :data:`KICK` swaps
are applied whatever they cost and it descends again (iterated local
search); the cheapest order seen is kept. ``keep_rank0`` (not rotation
invariant) keeps process 0 at new rank 0 in every layout and out of every
swap. The same seed gives the same order.

Complexity: the layouts are :math:`O(n \\log n)` each plus one model
evaluation; the descent :math:`O(\\text{evaluations} \\cdot \\text{steps}
\\cdot \\text{levels})` for Rabenseifner and recursive doubling / halving
(the two ranks' transfers in each step they take part in), independent of
the number of groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._rng import kernel_seed
from rankopt._validation import check_positive
from rankopt.models.base import CostModel
from rankopt.solvers._base import (
    MethodOutput,
    SolveContext,
    fix_first,
    rank0_pinned,
    register,
    start_order,
)

__all__ = [
    "layout",
    "packed_order",
    "contiguous_order",
    "applies",
    "EVALS_PER_RANK",
    "MAX_EVALS",
    "ANNEAL_MAX_N",
]

#: Swap evaluations per process of the guided descent (all starts together) ...
EVALS_PER_RANK = 150
#: ... at least this many (small jobs, where an evaluation costs little) ...
MIN_EVALS = 50_000
#: ... and at most this many (at 4,096 processes an evaluation waits on memory, about
#: 30 us: 4-5 s of CPU. On six networks of 4,096, twice this budget split evenly
#: between the two starts priced 0-0.05% lower in twice the time).
MAX_EVALS = 150_000
#: Evaluations per process without a gain after which the descent has stalled.
PATIENCE = 40
#: Swaps applied whatever they cost when the descent stalls (then it descends again).
KICK = 8
#: Layouts the descent starts from (the cheapest ones).
STARTS = 2
#: The starts race: each descends on ``1 / (RACE * starts)`` of the budget, then the
#: cheapest of them takes the rest (see :func:`layout`).
RACE = 2
#: A start whose layout costs more than this times the cheapest one does not race
#: (its share of the budget is not spent; the others descend as if it had). In
#: ``bench/bench_solve_scale.py`` a second start 0.6% costlier won the race, those
#: 8-20% costlier lost it.
RACE_GAP = 1.1
#: Largest n for which the greedy-cluster order is a layout (its bit search
#: prices many orders in full).
GREEDY_MAX_N = 256
#: Largest n for which the ``anneal`` order is a layout (it takes seconds
#: above; on 48 uneven networks of 300-512 processes ``layout`` without it
#: priced 0.43-0.95 of ``anneal``'s cost, median 0.67).
ANNEAL_MAX_N = 256
#: Share of the descent's proposals that are uniform swaps (on four uneven
#: networks of 512-1,024 processes, 0.2 priced 0-5% higher than 0, 0.4 0-10%).
P_RANDOM = 0.0
#: Share of the guided proposals that bring a process of a partner's group
#: to a rank (the others take a rank's process next to one of its group's).
P_BRING = 0.5
#: Whether swaps that leave the cost unchanged but lower the evaluator's
#: tie-break measure are applied.
TIES = True
_REL_TOL = 1e-12
_STOP = {0: "local_optimum", 1: "time_limit", 2: "max_evals"}


def applies(model: CostModel) -> bool:
    """Whether ``model`` offers what ``layout`` needs: a compiled, incremental swap
    search (its own or a proxy's), its schedule's partners and the groups it prices."""
    caps = model.capabilities
    return _search(model) is not None and caps.partners is not None and len(caps.groups) > 0


def _search(model: CostModel) -> Any:
    """The incremental swap search the guided descents run: the model's own, else its
    proxy's (:attr:`~rankopt.models.base.Capabilities.proxy_search`), else None."""
    caps = model.capabilities
    for search in (caps.swap_search, caps.proxy_search):
        if search is not None and bool(search.incremental):
            return search
    return None


def _nested(groups: Sequence[NDArray[np.int64]]) -> list[NDArray[np.int64]]:
    """Labels per level, coarsest first, each made nested in the level above it."""
    out: list[NDArray[np.int64]] = []
    key: NDArray[np.int64] | None = None
    for lab in reversed(list(groups)):
        lab = np.asarray(lab, dtype=np.int64)
        key = lab if key is None else key * (int(lab.max()) + 1) + lab
        key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
        out.append(key)
    return out


def _members(procs: NDArray[np.int64], labels: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """``procs`` split by their label, each part in the order of ``procs``, by label."""
    lab = labels[procs]
    idx = np.argsort(lab, kind="stable")
    cuts = np.flatnonzero(np.diff(lab[idx])) + 1
    return np.split(procs[idx], cuts)


def _binary(size: int) -> list[int]:
    """``size`` as powers of two, largest first."""
    return [1 << b for b in range(size.bit_length() - 1, -1, -1) if size >> b & 1]


def _pack(units: list[NDArray[np.int64]], depth: int, levels: list[NDArray[np.int64]]) -> Any:
    """Processes of ``units`` (groups, or pieces of groups, at level ``depth``) packed.

    Each unit is cut into power-of-two pieces; its subgroups (the next level,
    or single processes at the finest) go into them first-fit, largest first,
    a subgroup that fits in no piece being split over the room left. The
    pieces of all units are laid out largest first (so each sits on a block
    aligned to its size) and each is packed again one level down.
    """
    pieces: list[tuple[int, int, list[NDArray[np.int64]]]] = []
    finest = depth + 1 >= len(levels)
    for u, unit in enumerate(units):
        sizes = _binary(len(unit))
        kids = (
            [unit[k : k + 1] for k in range(len(unit))]
            if finest
            else _members(unit, levels[depth + 1])
        )
        kids.sort(key=len, reverse=True)
        room = list(sizes)
        fill: list[list[NDArray[np.int64]]] = [[] for _ in sizes]
        rest = []
        for kid in kids:
            for t, r in enumerate(room):
                if r >= len(kid):
                    fill[t].append(kid)
                    room[t] -= len(kid)
                    break
            else:
                rest.append(kid)
        for kid in rest:
            off = 0
            for t, r in enumerate(room):
                if r and off < len(kid):
                    take = min(r, len(kid) - off)
                    fill[t].append(kid[off : off + take])
                    room[t] -= take
                    off += take
        pieces.extend((size, u, fill[t]) for t, size in enumerate(sizes))
    pieces.sort(key=lambda p: (-p[0], p[1]))
    if finest:
        return np.concatenate([np.concatenate(p[2]) for p in pieces])
    return np.concatenate([_pack(p[2], depth + 1, levels) for p in pieces])


def packed_order(groups: Sequence[NDArray[np.int64]]) -> NDArray[np.int64]:
    """The hierarchy packed into aligned power-of-two blocks of new ranks.

    Parameters
    ----------
    groups : sequence of ndarray (n,)
        Group of every process per level, finest first.

    Returns
    -------
    ndarray of int64
        ``order``: every group of every level cut into as few power-of-two
        pieces as its size allows (its binary digits), each piece on a
        block of new ranks aligned to its size, subgroups packed into their
        group's pieces the same way (see :func:`_pack`).

    Examples
    --------
    Racks of 3, 2 and 3 processes: the racks of 3 are cut into 2 + 1, and
    every pair of new ranks ``(2m, 2m + 1)`` holds one rack:

    >>> rack = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    >>> rack[packed_order([rack])].tolist()
    [0, 0, 1, 1, 2, 2, 0, 2]
    """
    levels = _nested(groups)
    n = len(levels[0])
    top = _members(np.arange(n, dtype=np.int64), levels[0])
    return np.asarray(_pack(top, 0, levels), dtype=np.int64)


def contiguous_order(
    groups: Sequence[NDArray[np.int64]], by_size: bool = False
) -> NDArray[np.int64]:
    """Every group one run of new ranks, coarsest level first.

    Groups follow each other by label, or (``by_size``) largest first at
    every level; processes within the finest group by original rank.

    Examples
    --------
    >>> rack = np.array([1, 0, 1, 1, 0])
    >>> contiguous_order([rack]).tolist(), contiguous_order([rack], by_size=True).tolist()
    ([1, 4, 0, 2, 3], [0, 2, 3, 1, 4])
    """
    levels = _nested(groups)
    n = len(levels[0])
    keys: list[NDArray[np.int64]] = [np.arange(n, dtype=np.int64)]
    for lab in reversed(levels):  # lexsort: the last key is the primary one
        if by_size:
            size = np.bincount(lab)
            # rank the groups by size, largest first, ties by label
            rank = np.empty_like(size)
            rank[np.lexsort((np.arange(len(size)), -size))] = np.arange(len(size))
            keys.append(rank[lab])
        else:
            keys.append(lab)
    return np.asarray(np.lexsort(keys), dtype=np.int64)


def _bit_reversed(order: NDArray[np.int64]) -> NDArray[np.int64]:
    """``order`` read at the bit-reversed new rank (n a power of two)."""
    n = len(order)
    b = n.bit_length() - 1
    r = np.arange(n)
    rev = np.zeros(n, dtype=np.int64)
    for t in range(b):
        rev |= ((r >> t) & 1) << (b - 1 - t)
    return order[rev]


def _layouts(model: CostModel, ctx: SolveContext) -> tuple[dict[str, NDArray[np.int64]], int]:
    """The candidate orders of step 1 (see the module docstring), by name, and
    the model evaluations spent building them."""
    caps = model.capabilities
    n = model.n
    groups = list(caps.groups)
    out = {
        "packed": packed_order(groups),
        "contiguous": contiguous_order(groups),
        "contiguous_by_size": contiguous_order(groups, by_size=True),
    }
    if n >= 4 and n & (n - 1) == 0:
        for name in list(out):
            out[name + "_reversed"] = _bit_reversed(out[name])
    evals = 0
    if n <= ANNEAL_MAX_N:
        # what ``auto`` ran for these models before (same seed, same order):
        # affordable here, and the descent can only improve on it
        from rankopt.solvers.anneal import anneal

        m = ctx.options.get("max_evals")  # a budget given: half of it
        sub = dataclasses.replace(
            ctx,
            gen=np.random.default_rng(ctx.seed),
            options={} if m is None else {"max_evals": max(int(m) // 2, 1)},
            history=[],
            callback=None,
        )
        out_anneal = anneal(model, sub)
        out["anneal"] = np.asarray(out_anneal.order, dtype=np.int64)
        evals += out_anneal.evaluations
    if n <= GREEDY_MAX_N and caps.latency is not None:
        from rankopt.solvers.greedy import greedy_order

        out["greedy_cluster"], greedy_evals = greedy_order(model, ctx)
        evals += greedy_evals
    out["start"] = start_order(ctx, n)
    if rank0_pinned(model, ctx):
        out = {k: o if o[0] == 0 else fix_first(o) for k, o in out.items()}
    return out, evals


def _guide(model: CostModel, n: int) -> tuple[Any, ...]:
    """The descent's proposal tables: partners (CSR, cumulative weights), the
    levels whose groups hold more than one process, the members of their
    groups and the levels' cumulative probabilities (alike)."""
    caps = model.capabilities
    assert caps.partners is not None
    ptr, idx, w = caps.partners
    cum = np.zeros(len(w), dtype=np.float64)
    if len(w):
        c = np.cumsum(w)
        start = np.repeat(np.concatenate([[0.0], c])[ptr[:-1]], np.diff(ptr))
        cum = c - start  # cumulative within each rank's segment
    levels = [lab for lab in reversed(_nested(caps.groups)) if int(lab.max()) + 1 < n]
    if not levels:
        empty = np.zeros((0, n), dtype=np.int64)
        none = np.zeros(0, dtype=np.int64)
        return ptr, idx, cum, empty, np.zeros((0, 2), dtype=np.int64), none, np.ones(1)
    labels = np.ascontiguousarray(np.array(levels, dtype=np.int64))
    lcum = np.arange(1, len(levels) + 1, dtype=np.float64) / len(levels)  # levels alike
    gmax = int(labels.max()) + 1
    gptr = np.zeros((len(levels), gmax + 1), dtype=np.int64)
    gmem = np.empty(len(levels) * n, dtype=np.int64)
    for k, lab in enumerate(levels):
        gptr[k, 1:] = np.cumsum(np.bincount(lab, minlength=gmax))
        gmem[k * n : (k + 1) * n] = np.argsort(lab, kind="stable")
    return (
        np.ascontiguousarray(ptr, dtype=np.int64),
        np.ascontiguousarray(idx, dtype=np.int64),
        cum,
        labels,
        gptr,
        gmem,
        lcum,
    )


@register(
    "layout",
    options=("max_evals", "starts"),
    doc="group layouts priced by the model, then a guided swap descent (step schedules)",
)
def layout(model: CostModel, ctx: SolveContext) -> MethodOutput:
    """Group layouts and a guided swap descent (see the module docstring)."""
    if not applies(model):
        from rankopt._validation import RankoptInputError

        raise RankoptInputError(
            "method 'layout' needs a model with a compiled swap search, its schedule's "
            "partners and groups to lay out (a step schedule under 'contention'); "
            "use method='anneal' for this one."
        )
    n = model.n
    m = ctx.options.get("max_evals")
    if m is not None:
        budget = check_positive(m, "max_evals", integer=True)
    elif ctx.max_iter is not None:
        budget = int(ctx.max_iter)
    else:
        budget = min(max(EVALS_PER_RANK * n, MIN_EVALS), MAX_EVALS)
    starts = check_positive(ctx.options.get("starts", STARTS), "starts", integer=True)
    cands, evaluations = _layouts(model, ctx)
    costs = {k: float(model.cost(o)) for k, o in cands.items()}
    evaluations += len(cands)
    ranked = sorted(costs, key=lambda k: (costs[k], k))
    best = ranked[0]
    best_order, best_cost = cands[best], costs[best]
    ctx.record(best_cost, 0)
    search = _search(model)
    tables = _guide(model, n)
    pinned = rank0_pinned(model, ctx)
    iterations, stop = 0, "local_optimum"
    picked: list[str] = []  # the cheapest layouts, each order once
    for name in ranked:
        if len(picked) < starts and all(not np.array_equal(cands[name], cands[p]) for p in picked):
            picked.append(name)

    def descend(order: NDArray[np.int64], share: int) -> tuple[float, int]:
        """The guided descent on ``order`` (in place) for ``share`` evaluations."""
        nonlocal iterations, evaluations, stop, best_order, best_cost
        moves, evals, st = search.guided(
            order,
            kernel_seed(ctx.gen),
            int(share),
            float(ctx.remaining()),
            pinned,
            _REL_TOL,
            int(PATIENCE * n),
            KICK,
            *tables,
            P_RANDOM,
            P_BRING,
            TIES,
        )
        iterations += moves
        evaluations += evals + 1
        stop = _STOP[st]
        c = float(model.cost(order))
        if c < best_cost:
            best_order, best_cost = order.copy(), c
            ctx.record(c, iterations)
        return c, st

    # the race: each start descends on 1 / (RACE * starts) of the budget (one start:
    # all of it), then the cheapest of them goes on with what is left
    first = budget // (RACE * len(picked)) if len(picked) > 1 else budget
    raced: list[tuple[float, NDArray[np.int64]]] = []
    unspent = 0  # the shares of the starts left out of the race
    for name in picked:
        share = min(first, budget - evaluations - unspent)
        if share <= 0 or ctx.out_of_time():
            stop = "max_evals" if share <= 0 else "time_limit"
            break
        if raced and costs[name] > RACE_GAP * costs[picked[0]]:
            kernel_seed(ctx.gen)  # the seed it would have taken: the others' stay
            unspent += share + 1
            continue
        order = np.array(cands[name], dtype=np.int64)
        c, st = descend(order, share)
        raced.append((c, order))
        if st == 1:
            break
    else:
        share = budget - evaluations - unspent
        if len(picked) > 1 and share > 0 and not ctx.out_of_time():
            descend(min(raced, key=lambda r: r[0])[1], share)
    return MethodOutput(best_order, iterations, evaluations, stop)
