"""Process mapping: a job's point-to-point traffic placed on a hierarchical network.

``map``
    For models that price point-to-point traffic
    (:attr:`~rankopt.models.base.Capabilities.traffic`: a
    :class:`~rankopt.models.traffic.TrafficModel`, or a workload holding one):

    1. **Hierarchy.** The groups the model prices (finest first), else tiers
       read off the latency matrix when it has a few exact ones (a synthetic
       or provider distance, :func:`distance_tiers`), else
       :func:`rankopt.probe.hierarchy.infer_hierarchy` (up to
       :data:`INFER_MAX_N` processes).
    2. **Top-down partition** (recursive multisection along the hierarchy,
       the strategy of SharedMap and VieM): the ranks are split among the
       coarsest groups with the groups' exact sizes, then each part among
       its group's subgroups, down to the finest groups, whose processes
       take their part's ranks. Each split is a chain of bisections of the
       symmetrised traffic graph (every pair's messages and bytes priced at
       the mean latency and bandwidth). A bisection of more than
       ``coarsen_to`` ranks (:data:`COARSEN_TO`) is multilevel, as in
       KaFFPa, Scotch and METIS: the graph is coarsened by heavy-edge
       matching (rating ``w(u, v)^2 / (c(u) c(v))`` for vertex weights
       ``c``) to about ``coarsen_to`` vertices, the coarsest graph is split
       by the best of ``tries / cycles`` (rounded up) weighted growths
       (:data:`TRIES`; :data:`TOP_TRIES` times as many at the coarsest
       level of the hierarchy, whose cut is the dearest), each refined by
       Fiduccia–Mattheyses (FM) passes, and the sides are projected back
       level by level and refined there by FM within a slack of the level's
       heaviest vertex; on the ranks themselves the sides are made exact and
       refined by FM passes whose moves alternate between the two sides
       (balance stays exact). ``cycles`` such runs (:data:`CYCLES`, each
       with its own matchings) and :data:`FLAT_TRIES` growths on the ranks
       themselves compete; smaller bisections take the best of ``tries``
       growths on the ranks. A growth is greedy graph growing from a
       pseudo-peripheral vertex (the vertex whose move lowers the cut most
       joins next), then FM; the smallest cut is kept. The whole partition
       is made ``restarts`` times (:data:`RESTARTS`; :data:`LARGE_RESTARTS`
       above :data:`RESTARTS_MAX_N` processes), each with its own
       generator (``Generator.spawn``): the refined orders of all are
       candidates.
    3. **Relaxed start** for a dense traffic (at least :data:`RELAX_DENSITY` of
       the ordered pairs of ranks communicate) of :data:`RELAX_MIN_N` to
       :data:`RELAX_MAX_N` processes, made and refined before the partitions:
       the α-β time relaxed to doubly stochastic matrices and descended by
       Frank–Wolfe from the barycentre, SciPy's FAQ
       (:mod:`rankopt.solvers._relax`; 0.16 s at n = 256). On such a traffic
       every rank talks to every other, the partitions have no structure to
       find, and the swaps from them ended above FAQ's order in FAQ's time
       (in 9 of 16 runs at 192 and 256 processes, 8 of 8 at 384); from
       FAQ's order they end below it. Below :data:`RELAX_MIN_N` the swaps
       alone did better in FAQ's time and the start is not made.
    4. **Greedy start** up to :data:`GREEDY_MAX_N` processes: ranks placed
       one at a time, the most connected to those placed first, each on the
       free process where its traffic to them costs least; and the start
       (``init``, else the launch order).
    5. **Swap refinement** of every start on the α-β time of the traffic
       (``sum of messages * latency + bytes / bandwidth``: with
       :meth:`Traffic.from_weights <rankopt.models.traffic.Traffic.from_weights>`
       and no bandwidth, the classic ``sum of traffic * distance``), compiled
       (``src_ext/_traffic_map.pyx``): a swap of ranks ``i`` and ``j`` costs
       only the pairs touching them (their out- and in-edges), ranks wait in
       a queue (don't-look bits), and the partners of ``i`` are the ranks on
       the processes of the finest group (or the :data:`NEAR_K` nearest
       processes) of each of ``i``'s traffic neighbours; the best gaining
       swap of ``i`` is applied, and the two ranks and their neighbours look
       again. The cheapest refined start then goes through an iterated
       local search: ``kicks`` times (:data:`KICKS_PER_RANK` per process) a
       random rank swaps with a partner near one of its traffic neighbours,
       whatever it costs, the descent resumes from the ranks it touched,
       and the result is kept when it costs no more than the best so far,
       else undone. Up to :data:`FULL_MAX_N` processes a last descent tries
       every pair, so the order is a local optimum of all swaps.
    6. When the model's cost is not that time (``"contention"``, a workload
       that adds collectives), the cheapest order is refined on the model's
       own cost through :meth:`~rankopt.models.base.CostModel.swap_delta`,
       with the same partners and an evaluation budget
       (:data:`MODEL_EVALS_PER_RANK`).

    The cheapest order, never worse than the start. ``keep_rank0`` (not
    rotation invariant) keeps rank 0 on process 0 in every start and out of
    every swap. The same seed gives the same order.

Budgets: ``options={"max_evals": m}`` (swap evaluations per start and for
the iterated local search; default
:data:`EVALS_PER_RANK` per process, between :data:`MIN_EVALS` and
:data:`MAX_EVALS`) and ``max_iter`` (swaps applied per start) are
reproducible; ``time_limit`` is a guard: each start is made and refined
before the next is made, no further start is made once the time left is
less than the last start took to make (the first always is; a dense
traffic's partition, n = 256, takes about 60 ms), and every descent stops
where it is. ``tries``, ``fm_passes``,
``restarts``, ``coarsen_to`` (0: no multilevel bisection), ``cycles`` and
``kicks`` set the effort (the defaults: on the 4:8:k machines of
``bench/bench_traffic_map.py``, multilevel bisections priced up to 8% less
than growths on the ranks alone, in less time; the kicks about 0.5% less).

Complexity: a level of each partition costs :math:`O(\\text{cycles} \\cdot
\\text{passes} \\cdot E \\log n)` for the traffic's ``E`` communicating pairs
(the coarsest graphs' growths add :math:`O(\\text{tries} \\cdot \\text{passes}
\\cdot \\text{coarsen\\_to})` per bisection); a swap evaluation :math:`O(\\deg i
+ \\deg j)`. Only the hierarchy's detection from a bare matrix reads all
:math:`n^2` latencies.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt._rng import kernel_seed
from rankopt._validation import RankoptInputError, check_positive
from rankopt.models.base import CostModel
from rankopt.solvers._base import (
    MethodOutput,
    SolveContext,
    fix_first,
    no_worse_than_start,
    rank0_pinned,
    register,
    start_order,
)

_k = require_extension("rankopt.solvers._traffic_map")

__all__ = [
    "map_traffic",
    "applies",
    "distance_tiers",
    "partition_order",
    "TRIES",
    "FM_PASSES",
    "EVALS_PER_RANK",
    "GREEDY_MAX_N",
    "FULL_MAX_N",
]

#: Greedy growths per bisection (shared by the cycles on the coarsest graph when multilevel).
TRIES = 8
#: Growths per bisection at the coarsest level (its cut is the dearest), times ``tries``.
TOP_TRIES = 2
#: Partitions (each with its own seeds), each refined; the cheapest order is kept ...
RESTARTS = 6
#: ... up to this many processes; above it, this many (on the 4:8:k machines of
#: ``bench/bench_traffic_map.py`` at n = 4,096, 3 partitions priced within 0.4% of
#: 6 in about 60% of the time).
RESTARTS_MAX_N = 1_024
LARGE_RESTARTS = 3
#: Fiduccia–Mattheyses passes per growth (fewer when a pass gains nothing).
FM_PASSES = 8
#: Bisections of more ranks than this are multilevel, coarsened to about this many.
COARSEN_TO = 32
#: Multilevel runs per multilevel bisection (each with its own matchings) ...
CYCLES = 3
#: ... and growths on the ranks themselves that compete with them.
FLAT_TRIES = 4
#: Perturbations (kicks) per process of the iterated local search of the best start.
KICKS_PER_RANK = 2
#: Swap evaluations per process of one start's refinement ...
EVALS_PER_RANK = 2_000
#: ... at least this many ...
MIN_EVALS = 200_000
#: ... and at most this many.
MAX_EVALS = 20_000_000
#: Largest n with the greedy start and a refined launch order (init) as starts.
GREEDY_MAX_N = 256
#: Largest n whose last descent tries every pair of ranks.
FULL_MAX_N = 128
#: A traffic where at least this share of the ordered pairs of ranks communicate is
#: dense: its first start is the Frank–Wolfe relaxation (:mod:`rankopt.solvers._relax`) ...
RELAX_DENSITY = 0.5
#: ... from this many processes (below it the swaps alone did better in FAQ's time) ...
RELAX_MIN_N = 192
#: ... up to this many (a step is two dense products and a linear assignment) ...
RELAX_MAX_N = 512
#: ... with at most this many steps, fewer once a step moves less than ``RELAX_TOL``
#: (SciPy's FAQ defaults).
RELAX_STEPS = 30
RELAX_TOL = 0.03
#: Partners per neighbour without (small enough) finest groups: the nearest processes.
NEAR_K = 8
#: Largest finest group whose processes are all partners of a rank near it.
NEAR_GROUP_MAX = 64
#: Most distinct off-diagonal values of the first row for :func:`distance_tiers`.
MAX_TIERS = 8
#: Rows on which :func:`distance_tiers` checks that a threshold is an equivalence.
TIERS_CHECK_ROWS = 256
#: Largest n whose hierarchy is inferred by clustering when it has no exact tiers.
INFER_MAX_N = 2_048
#: Evaluations of the model's own ``swap_delta`` per process (step 5) ...
MODEL_EVALS_PER_RANK = 20
#: ... at most this many.
MODEL_MAX_EVALS = 20_000
_REL_TOL = 1e-12
_STOP = {0: "local_optimum", 1: "time_limit", 2: "max_evals", 3: "max_iter"}


def applies(model: CostModel) -> bool:
    """Whether ``model`` prices point-to-point traffic on a latency matrix (what ``map`` needs)."""
    caps = model.capabilities
    return caps.traffic is not None and caps.latency is not None


_I = NDArray[np.int64]
_F = NDArray[np.float64]
#: The kernels' view of the traffic: out-CSR, in-lists, messages, bytes, latency, bandwidth.
_Net = tuple[_I, _I, _I, _I, _I, _F, _F, _F, _F, bool]


@dataclass
class _Time:
    """The α-β time of the traffic, as the kernels read it, and its partition graph."""

    out_ptr: NDArray[np.int64]
    dst: NDArray[np.int64]
    in_ptr: NDArray[np.int64]
    in_src: NDArray[np.int64]
    in_eid: NDArray[np.int64]
    msgs: NDArray[np.float64]
    nbytes: NDArray[np.float64]
    lat: NDArray[np.float64]
    bw: NDArray[np.float64]
    has_bw: bool
    weight: NDArray[np.float64]  # per directed pair: its time at the mean latency/bandwidth
    xadj: NDArray[np.int64]  # the symmetrised graph (weights ``w``)
    adj: NDArray[np.int64]
    w: NDArray[np.float64]

    def net(self) -> _Net:
        return (
            self.out_ptr, self.dst, self.in_ptr, self.in_src, self.in_eid, self.msgs,
            self.nbytes, self.lat, self.bw, self.has_bw,
        )  # fmt: skip

    def cost(self, order: NDArray[np.int64]) -> float:
        return float(
            _k.time_cost(
                self.out_ptr, self.dst, self.msgs, self.nbytes, self.lat, self.bw,
                self.has_bw, order,
            )
        )  # fmt: skip


def _time_arrays(traffic: Any, latency: Any, bandwidth: Any) -> _Time:
    import scipy.sparse as sp

    lat = np.ascontiguousarray(latency, dtype=np.float64)
    n = lat.shape[0]
    b = sp.csr_array(traffic.bytes, dtype=np.float64)
    m = sp.csr_array(traffic.messages, dtype=np.float64)
    pattern = sp.csr_array(abs(b) + abs(m))
    pattern.sum_duplicates()
    pattern.eliminate_zeros()
    pattern.sort_indices()
    out_ptr = np.asarray(pattern.indptr, dtype=np.int64)
    dst = np.asarray(pattern.indices, dtype=np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(out_ptr))
    if dst.size:
        msgs = np.asarray(m[src, dst], dtype=np.float64).reshape(-1)
        nbytes = np.asarray(b[src, dst], dtype=np.float64).reshape(-1)
    else:
        msgs = nbytes = np.zeros(0)
    in_eid = np.argsort(dst, kind="stable").astype(np.int64)
    in_ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))]).astype(np.int64)
    has_bw = bandwidth is not None
    bw = np.ascontiguousarray(bandwidth, dtype=np.float64) if has_bw else np.ones((1, 1))
    off = ~np.eye(n, dtype=bool) if n <= 1024 else None
    mean_lat = _off_mean(lat, off)
    weight = msgs * mean_lat
    if has_bw:
        with np.errstate(divide="ignore"):
            weight = weight + nbytes * _off_mean(1.0 / bw, off)
    if not np.isfinite(weight).all() or weight.sum() <= 0:
        weight = msgs + nbytes / max(float(nbytes.max(initial=0.0)), 1.0)
    if weight.sum() <= 0:
        weight = np.ones_like(msgs)
    w_dir = sp.csr_array((weight, dst, out_ptr), shape=(n, n))
    sym = sp.csr_array(w_dir + w_dir.T)
    sym.sum_duplicates()
    sym.sort_indices()
    return _Time(
        out_ptr, dst, in_ptr, src[in_eid], in_eid, msgs, nbytes, lat, bw, has_bw, weight,
        np.asarray(sym.indptr, dtype=np.int64), np.asarray(sym.indices, dtype=np.int64),
        np.asarray(sym.data, dtype=np.float64),
    )  # fmt: skip


def _off_mean(a: NDArray[np.float64], off: NDArray[np.bool_] | None) -> float:
    """Mean of the finite off-diagonal entries (sampled rows when ``off`` is None)."""
    if off is not None:
        v = a[off]
    else:
        rows = np.linspace(0, a.shape[0] - 1, 64).astype(np.int64)
        v = np.delete(a[rows], rows + np.arange(rows.size) * a.shape[0])
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else 0.0


# ----------------------------------------------------------------------- hierarchy
def distance_tiers(latency: NDArray[Any]) -> list[NDArray[np.int64]] | None:
    """The hierarchy of a matrix with a few exact tiers, finest first, or ``None``.

    Each distinct off-diagonal value ``t`` of the first row (at most
    :data:`MAX_TIERS`, all but the largest) is a level when "latency at most
    ``t``" is an equivalence on the processes (labels: the first process of
    each class, renumbered from 0); levels of one group or of single
    processes are dropped. ``None`` when some threshold is no equivalence
    (checked on :data:`TIERS_CHECK_ROWS` rows spread over the matrix;
    measured, noisy matrices: use
    :func:`rankopt.probe.hierarchy.infer_hierarchy`).

    Examples
    --------
    >>> g = np.array([0, 0, 1, 1])
    >>> d = np.where(g[:, None] == g[None, :], 1.0, 10.0)
    >>> [lab.tolist() for lab in distance_tiers(d)]
    [[0, 0, 1, 1]]
    """
    lat = np.asarray(latency)
    n = lat.shape[0]
    if n < 3:
        return None
    vals = np.unique(lat[0, 1:])
    if vals.size > MAX_TIERS:
        return None
    levels: list[NDArray[np.int64]] = []
    diag = np.arange(n)
    rows = diag if n <= TIERS_CHECK_ROWS else np.linspace(0, n - 1, TIERS_CHECK_ROWS).astype(int)
    for t in vals[:-1]:
        close = lat <= t
        close[diag, diag] = True
        first = close.argmax(axis=1)
        if not np.array_equal(close[rows], first[rows, None] == first[None, :]):
            return None
        lab = np.unique(first, return_inverse=True)[1].reshape(-1).astype(np.int64)
        g = int(lab.max()) + 1
        if 1 < g < n and not any(np.array_equal(lab, x) for x in levels):
            levels.append(lab)
    return levels


def _levels(model: CostModel, lat: NDArray[np.float64]) -> list[NDArray[np.int64]]:
    """The hierarchy the partition follows, finest first (see the module docstring)."""
    caps = model.capabilities
    if caps.groups:
        return [np.asarray(g, dtype=np.int64) for g in caps.groups]
    tiers = distance_tiers(lat)
    if tiers is not None:
        return tiers
    if lat.shape[0] <= INFER_MAX_N:
        from rankopt.probe.hierarchy import infer_hierarchy

        return [np.asarray(g, dtype=np.int64) for g in infer_hierarchy(lat)]
    return []


def _nested(levels: Sequence[NDArray[np.int64]]) -> list[NDArray[np.int64]]:
    """Labels per level, coarsest first, each made nested in the level above it."""
    out: list[NDArray[np.int64]] = []
    key: NDArray[np.int64] | None = None
    for lab in reversed(list(levels)):
        key = lab if key is None else key * (int(lab.max()) + 1) + lab
        key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
        out.append(key)
    return out


def _split(procs: NDArray[np.int64], labels: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """``procs`` by label (ascending), each part in ascending order."""
    lab = labels[procs]
    idx = np.lexsort((procs, lab))
    cuts = np.flatnonzero(np.diff(lab[idx])) + 1
    return np.split(procs[idx], cuts)


def partition_order(
    t: _Time,
    levels: Sequence[NDArray[np.int64]],
    gen: np.random.Generator,
    tries: int = TRIES,
    passes: int = FM_PASSES,
    coarsen_to: int = COARSEN_TO,
    cycles: int = CYCLES,
) -> tuple[NDArray[np.int64], int]:
    """The order of the top-down partition (step 2), and how many bisections it took."""
    n = t.lat.shape[0]
    order = np.empty(n, dtype=np.int64)
    loc = np.full(n, -1, dtype=np.int64)
    nested = _nested(levels)
    count = 0

    def place(ranks: NDArray[np.int64], procs: NDArray[np.int64], depth: int) -> None:
        if depth >= len(nested) or procs.size <= 1:
            order[ranks] = procs
            return
        groups = _split(procs, nested[depth])
        if len(groups) == 1:
            place(ranks, procs, depth + 1)
        else:
            multisect(ranks, groups, depth)

    def multisect(ranks: NDArray[np.int64], groups: list[NDArray[np.int64]], depth: int) -> None:
        nonlocal count
        if len(groups) == 1:
            place(ranks, groups[0], depth + 1)
            return
        cum = list(itertools.accumulate(g.size for g in groups))
        h = 1 + min(range(len(groups) - 1), key=lambda k: abs(cum[k] - cum[-1] / 2))
        side, _ = _k.bisect(
            t.xadj, t.adj, t.w, ranks, int(cum[h - 1]), kernel_seed(gen),
            tries * (TOP_TRIES if depth == 0 else 1), passes, loc, coarsen_to, FLAT_TRIES, cycles,
        )  # fmt: skip
        count += 1
        multisect(ranks[side == 0], groups[:h], depth)
        multisect(ranks[side == 1], groups[h:], depth)

    place(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64), 0)
    return order, count


def _near(levels: Sequence[NDArray[np.int64]], lat: NDArray[np.float64]) -> tuple[Any, Any]:
    """Partner processes of each process (CSR): its finest group, else its nearest."""
    n = lat.shape[0]
    if levels:
        lab = levels[0]
        sizes = np.bincount(lab)
        if sizes.max() <= NEAR_GROUP_MAX:
            members = np.argsort(lab, kind="stable").astype(np.int64)
            gptr = np.concatenate([[0], np.cumsum(sizes)])
            cnt = sizes[lab]
            ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
            idx = np.concatenate([members[gptr[g] : gptr[g + 1]] for g in lab])
            return ptr, idx.astype(np.int64)
    k = min(NEAR_K, n - 1)
    if k <= 0:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    d = np.array(lat, dtype=np.float64)
    np.fill_diagonal(d, -np.inf)  # a process is its own first partner
    idx = np.argpartition(d, k, axis=1)[:, : k + 1]
    return np.arange(0, n * (k + 1) + 1, k + 1, dtype=np.int64), idx.reshape(-1).astype(np.int64)


# ----------------------------------------------------------------------- refinement
def _refine(
    t: _Time,
    order: NDArray[np.int64],
    near: tuple[Any, Any],
    ctx: SolveContext,
    budget: int,
    pinned: bool,
    kicks: int = 0,
) -> tuple[int, int, str]:
    n = order.size
    cost = t.cost(order)
    tol = max(_REL_TOL * cost, 1e-300)
    moves, evals, st = _k.refine_time(
        *t.net(), near[0], near[1], order, kernel_seed(ctx.gen), int(budget),
        int(ctx.max_iter or 0), float(ctx.remaining()), pinned, tol, False, kicks,
    )  # fmt: skip
    if st == 0 and n <= FULL_MAX_N and not ctx.out_of_time():
        left = 0 if budget <= 0 else max(budget - evals, 1)
        m2, e2, st = _k.refine_time(
            *t.net(), near[0], near[1], order, kernel_seed(ctx.gen), left,
            int(ctx.max_iter or 0), float(ctx.remaining()), pinned, tol, True,
        )  # fmt: skip
        moves, evals = moves + m2, evals + e2
    return moves, evals, _STOP[st]


def _refine_model(
    model: CostModel,
    t: _Time,
    order: NDArray[np.int64],
    near: tuple[Any, Any],
    ctx: SolveContext,
    budget: int,
    pinned: bool,
) -> tuple[int, int, str]:
    """Step 6: the same partners, priced by ``model.swap_delta``."""
    n = order.size
    cost = float(model.cost(order))
    tol = _REL_TOL * cost
    if tol <= 0:
        return 0, 0, "local_optimum"
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.arange(n)
    nbr = [
        np.unique(np.concatenate([t.dst[t.out_ptr[i] : t.out_ptr[i + 1]],
                                  t.in_src[t.in_ptr[i] : t.in_ptr[i + 1]]]))
        for i in range(n)
    ]  # fmt: skip
    queue = list(ctx.gen.permutation(n))
    inq = np.ones(n, dtype=bool)
    moves = evals = 0
    head = 0
    while head < len(queue):
        i = int(queue[head])
        head += 1
        inq[i] = False
        if pinned and i == 0:
            continue
        cands: set[int] = set()
        for k in nbr[i]:
            r = order[k]
            cands.update(int(inv[p]) for p in near[1][near[0][r] : near[0][r + 1]])
        cands.discard(i)
        if pinned:
            cands.discard(0)
        best, bj = -tol, -1
        for j in sorted(cands):
            d = float(model.swap_delta(order, i, j))
            evals += 1
            if d < best:
                best, bj = d, j
        if bj >= 0:
            order[i], order[bj] = order[bj], order[i]
            inv[order[i]], inv[order[bj]] = i, bj
            moves += 1
            cost += best
            ctx.record(cost, moves)
            for r in (i, bj, *nbr[i], *nbr[bj]):
                if not inq[r]:
                    inq[r] = True
                    queue.append(int(r))
            if ctx.max_iter is not None and moves >= ctx.max_iter:
                return moves, evals, "max_iter"
        if evals >= budget:
            return moves, evals, "max_evals"
        if ctx.out_of_time():
            return moves, evals, "time_limit"
    return moves, evals, "local_optimum"


# ----------------------------------------------------------------------- the method
def _count(ctx: SolveContext, name: str, default: int) -> int:
    """A non-negative integer option (0 turns its step off)."""
    value = ctx.options.get(name, default)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value == 0:
        return 0
    return int(check_positive(value, name, integer=True))


def _relaxed_start(t: _Time, pinned: bool, ctx: SolveContext) -> tuple[_I, int] | None:
    """The Frank–Wolfe start of a dense traffic (:mod:`rankopt.solvers._relax`), else None.

    Made for :data:`RELAX_MIN_N` to :data:`RELAX_MAX_N` processes when at least
    :data:`RELAX_DENSITY` of the ordered pairs communicate and every price
    the traffic can meet is finite; ``(order, steps)``.
    """
    from rankopt.solvers._relax import relaxed_order

    n = t.lat.shape[0]
    if not RELAX_MIN_N <= n <= RELAX_MAX_N or t.dst.size < RELAX_DENSITY * n * (n - 1):
        return None
    problem = _relaxed_problem(t, pinned)
    if problem is None:
        return None
    deadline = None if ctx.time_limit is None else ctx.start + ctx.time_limit
    order, steps = relaxed_order(*problem, RELAX_STEPS, RELAX_TOL, deadline)
    if pinned:
        order = np.concatenate([[0], order + 1]).astype(np.int64)
    return order, steps


def _relaxed_problem(t: _Time, pinned: bool) -> tuple[list[tuple[_F, _F]], _F | None] | None:
    """The α-β time as ``sum_k <A_k P B_k^T, P> + <C, P>``: ``([(A_k, B_k)], C)``.

    One term for the messages (priced by latency), one for the bytes (by the
    inverse bandwidth), each left out when the traffic has none; None when a
    price the traffic can meet is not finite. With ``pinned`` (rank 0 on
    process 0) the matrices are those of the other ranks and processes, and
    rank 0's pairs with them the linear term ``C``; else ``C`` is None.
    """
    n = t.lat.shape[0]
    src = np.repeat(np.arange(n), np.diff(t.out_ptr))
    terms = []
    prices = [(t.msgs, t.lat)]
    if t.has_bw:
        with np.errstate(divide="ignore"):
            prices.append((t.nbytes, 1.0 / t.bw))
    for weights, price in prices:
        a = np.zeros((n, n))
        a[src, t.dst] = weights
        if not a.any():
            continue
        b = np.array(price, dtype=np.float64)
        if not a.diagonal().any():
            np.fill_diagonal(b, 0.0)  # no traffic stays on its process: its price is moot
        if not np.isfinite(b).all():
            return None
        terms.append((a, b))
    if not terms:
        return None
    if not pinned:
        return terms, None
    linear = np.zeros((n - 1, n - 1))
    for a, b in terms:  # rank a on process j meets rank 0 on process 0 both ways
        linear += np.outer(a[0, 1:], b[0, 1:]) + np.outer(a[1:, 0], b[1:, 0])
    return [(a[1:, 1:], b[1:, 1:]) for a, b in terms], linear


def _budget(ctx: SolveContext, n: int) -> int:
    m = ctx.options.get("max_evals")
    if m is not None:
        return int(check_positive(m, "max_evals", integer=True))
    return int(min(max(EVALS_PER_RANK * n, MIN_EVALS), MAX_EVALS))


@register(
    "map",
    options=("max_evals", "tries", "fm_passes", "restarts", "coarsen_to", "cycles", "kicks"),
    doc="top-down partition of the traffic along the hierarchy, then swaps (traffic)",
)
def map_traffic(model: CostModel, ctx: SolveContext) -> MethodOutput:
    """Process mapping of point-to-point traffic (see the module docstring)."""
    if not applies(model):
        raise RankoptInputError(
            "method 'map' needs a model with point-to-point traffic (a TrafficModel, or a "
            "workload with traffic) priced on a latency matrix; this model has none: use "
            "method='auto'."
        )
    caps = model.capabilities
    n = model.n
    tries = int(check_positive(ctx.options.get("tries", TRIES), "tries", integer=True))
    passes = int(check_positive(ctx.options.get("fm_passes", FM_PASSES), "fm_passes", integer=True))
    restarts = RESTARTS if n <= RESTARTS_MAX_N else LARGE_RESTARTS
    restarts = int(check_positive(ctx.options.get("restarts", restarts), "restarts", integer=True))
    coarsen_to = _count(ctx, "coarsen_to", COARSEN_TO)
    cycles = int(check_positive(ctx.options.get("cycles", CYCLES), "cycles", integer=True))
    kicks = _count(ctx, "kicks", KICKS_PER_RANK * n)
    budget = _budget(ctx, n)
    t = _time_arrays(caps.traffic, caps.latency, caps.bandwidth)
    levels = _levels(model, t.lat)
    pinned = rank0_pinned(model, ctx)
    start = start_order(ctx, n)
    if pinned and start[0] != 0:
        start = fix_first(start)
    gens = ctx.gen.spawn(restarts)  # the descents' seeds do not depend on ``restarts``

    def starts() -> Iterator[tuple[NDArray[np.int64], int]]:
        """Each start as it is needed (and its bisections): under ``time_limit``
        the first is refined before the second is made."""
        relaxed = _relaxed_start(t, pinned, ctx)
        if relaxed is not None:
            yield relaxed
        for gen in gens:
            part, count = partition_order(t, levels, gen, tries, passes, coarsen_to, cycles)
            yield (fix_first(part) if pinned else part), count
        if n <= GREEDY_MAX_N:
            greedy = np.empty(n, dtype=np.int64)
            first = 0 if pinned else int(np.argmin(t.lat.sum(axis=1)))
            _k.greedy_place(*t.net(), t.weight, first, greedy)
            yield (fix_first(greedy) if pinned else greedy), 0
            yield start.copy(), 0

    near = _near(levels, t.lat)
    exact = True
    evaluations, iterations, stop = 0, 0, "local_optimum"
    best: NDArray[np.int64] | None = None
    best_cost = np.inf
    made = time.perf_counter()
    for s, (order, count) in enumerate(starts()):
        took = time.perf_counter() - made  # to make this start
        evaluations += count
        if s == 0:
            exact = all(
                abs(t.cost(o) - float(model.cost(o)))
                <= 1e-9 * max(abs(float(model.cost(o))), 1e-300)
                for o in (start, order)
            )
        moves, evals, st = _refine(t, order, near, ctx, budget, pinned)
        iterations += moves
        evaluations += evals
        if st != "local_optimum":
            stop = st  # a budget or the clock cut a descent short
        c = t.cost(order) if exact else float(model.cost(order))
        if c < best_cost:
            best, best_cost = order, c
            ctx.record(c, iterations)
        if ctx.out_of_time() or (ctx.time_limit is not None and ctx.remaining() < took):
            stop = "time_limit"
            break  # no further start is made: the next would end past the limit
        made = time.perf_counter()
    assert best is not None
    if kicks > 0 and not ctx.out_of_time():
        moves, evals, st = _refine(t, best, near, ctx, budget, pinned, kicks)
        iterations += moves
        evaluations += evals
        if st != "local_optimum":
            stop = st
        if exact:
            ctx.record(t.cost(best), iterations)
    if not exact:
        m = ctx.options.get("max_evals")
        mbudget = budget if m is not None else min(MODEL_EVALS_PER_RANK * n, MODEL_MAX_EVALS)
        moves, evals, stop = _refine_model(model, t, best, near, ctx, mbudget, pinned)
        iterations += moves
        evaluations += evals
    order, _ = no_worse_than_start(model, ctx, best)
    return MethodOutput(order, iterations=iterations, evaluations=evaluations, stop_reason=stop)
