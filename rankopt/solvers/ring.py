"""Ring methods: nearest neighbour, 2-opt / Or-opt / 3-opt local search, iterated local search.

These drive the compiled kernels in ``src_ext/_ring_search.pyx`` and
``src_ext/_ring_directed.pyx``. They work on a symmetric weight matrix: the
model's ``ring_weights`` for ``sum`` (the mean of both directions for
asymmetric input), and a threshold search for ``bottleneck``.

``nearest_neighbor``
    Greedy construction from a random start, O(n^2).
``two_opt``
    A greedy-edge ring over the candidate links (or ``init``), then local
    search over candidate lists with don't-look bits: 2-opt, Or-opt (runs of
    1-3 moved, either orientation), sequential 3-opt (two chained 2-opt
    moves, scored from positions before anything moves) and a Lin-Kernighan
    move whose steps are LKH's sequential 3-opt basis move (up to 8 steps
    under the positive-gain rule; each step tries every candidate t3 with
    both tour neighbours t4 -- the 2-opt case and the or-type case whose
    first exchange alone would split the ring, which takes in the or-3opt
    exchange of two adjacent runs -- and every candidate t5 with each valid
    t6, closes at the first that gains, else goes on from the best partial
    gain); every move is scored by an O(1) delta. Candidates: the ``neighbors``
    (default 10) nearest processes. Then the exchanges at the ring's longest
    links (as ``ils`` after its kicks, below).
``ils``
    The same, on the ``neighbors`` (default 5, as in LKH; 6 above n = 2048,
    ``alpha_neighbors``) alpha-nearest
    candidates (minimum 1-tree with subgradient node penalties, as in LKH;
    up to n = 4096, ``options={"candidates": "nearest"}`` turns it off and
    takes the 10 nearest), then iterated local search: each kick swaps two short adjacent runs
    (an Or-3opt segment exchange within ``window`` positions), repairs
    locally, and is undone if the ring got longer. ``max_iter`` is the number
    of kicks. On matrices without locality (a link between processes within
    ``window`` positions weighs over 50 ring links, as with independent
    uniform weights) the kick is instead the swap of two adjacent runs from a
    random process whose first two new links are candidate links (the pair of
    smallest delta); up to n = 2048 three in ten of these kicks are double
    bridges with two candidate links, a kick is kept up to half a mean ring
    link above the best ring so far and the default budget is
    ``BRIDGE_KICK_FACTOR`` times ``default_kicks(n)`` (see ``kick_type``);
    above it the kicks are all candidate kicks, ``CANDIDATE_KICK_FACTOR``
    times the default budget (``ALPHA_KICK_FACTOR`` up to n = 4096), with a
    full local-search pass every n / 8 kicks (``pass_every``), and up to
    n = 4096 kept up to half a mean ring link above the best ring
    (``kick_walk``). With these two kick types the Lin-Kernighan move of
    the repairs is a chain of up to ``KOPT_STEPS`` sequential 5-opt steps
    (LKH's basis move, ``kick_move``) instead of 3-opt steps. After the
    kicks, the exchanges of two adjacent runs cut at three of the ring's
    ``LONG_LINKS`` longest links, the best while one gains, then local search
    (``long_link_exchanges``): they join a group that the ring visits in two
    pieces far apart, which no move between candidates and no kick within a
    window makes.
Asymmetric ``sum``
    The symmetrised search cannot tell which way round a link is cheaper, so
    the ring it finds (in its better direction) is then polished on the
    directed matrix by moves that keep the direction: Or-opt, or-3opt and
    run-exchange kicks (``_ring_directed``): ``max_iter // 2``, else
    ``default_polish_kicks(n)``. Under a
    ``time_limit`` the symmetric kicks stop at 3/4 of it, leaving the rest to
    the polish.
``bottleneck`` objective
    Binary search on a threshold T between a lower bound (every process
    needs two links: the largest second-smallest entry of a row) and the
    bottleneck of a good ring; a threshold is feasible when local search on
    ``w + P * (w > T)`` finds a ring without penalised links. The last feasible
    ring is then shortened by ILS under the same penalty (ties broken by sum).

Every method returns the better of its ring and its start (``init``, else the
launch order) under the model's own cost: the search sees symmetrised or
penalised weights, so on asymmetric input its ring can price above the start.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray

from rankopt._build_check import require_extension
from rankopt._rng import kernel_seed
from rankopt._validation import RankoptInputError, check_positive
from rankopt.models.base import CostModel
from rankopt.solvers._base import MethodOutput, SolveContext, no_worse_than_start, register

_ring_search = require_extension("rankopt.solvers._ring_search")
_ring_directed = require_extension("rankopt.solvers._ring_directed")
_ring_eval = require_extension("rankopt.models._ring_eval")

__all__ = [
    "nearest_neighbor",
    "two_opt",
    "ils",
    "default_kicks",
    "default_polish_kicks",
    "ring_seed",
    "candidate_lists",
    "greedy_ring",
    "best_direction",
    "kick_type",
    "pass_every",
    "alpha_neighbors",
    "kick_walk",
    "kick_move",
]

_STOP = {0: "local_optimum", 1: "time_limit", 2: "max_iter"}
DEFAULT_NEIGHBORS = 10
ALPHA_NEIGHBORS = 5
LOCAL_PASSES = 20
#: local-search passes go on while a pass gains more than this share of the ring
LOCAL_PASS_GAIN = 1e-3
#: before candidate kicks alone (``kick_type`` 1, up to ``ALPHA_MAX_N``), they go on while
#: one gains more than this
CANDIDATE_PASS_GAIN = 1e-5
DEFAULT_WINDOW = 150
DIRECTED_WINDOW = 10
CANDIDATES = ("auto", "alpha", "nearest")
ALPHA_MAX_N = 4096
#: above this ``window_link_ratio`` the kicks are candidate double bridges
CANDIDATE_KICK_RATIO = 50.0
#: their default budget: this many times ``default_kicks(n)`` (a repair by 5-opt steps,
#: ``kick_move``, costs several times one by 3-opt steps; at n = 16,384 on uniform weights
#: the default solve takes ~7 s where it took ~5 s, for a ring ~1% shorter)
CANDIDATE_KICK_FACTOR = 0.4
#: with alpha candidates (up to ``ALPHA_MAX_N``) instead (at n = 4,096 ~2 s, was ~1.3 s,
#: for a ring ~0.5% shorter)
ALPHA_KICK_FACTOR = 0.4
#: up to this n such matrices get the mixed kick (``kick_type`` 2) instead
BRIDGE_MAX_N = 2048
#: its share of double bridges, the rest candidate kicks
BRIDGE_SHARE = 0.3
#: and its walk: a kick is kept up to this many mean ring links above the best ring
BRIDGE_ACCEPT = 0.5
#: its default budget: this many times ``default_kicks(n)`` (with 5-opt repairs at
#: n = 1,024: ~0.6 s; 0.3 took ~0.85 s for a ring 0.01% shorter)
BRIDGE_KICK_FACTOR = 0.2
#: with candidate kicks alone (n > BRIDGE_MAX_N), a full local-search pass every n / this many kicks
PASS_FRACTION = 8
#: with alpha candidates (n from BRIDGE_MAX_N + 1 to ALPHA_MAX_N): this many candidates, and
#: the walk of candidate kicks alone (as ``BRIDGE_ACCEPT``)
LARGE_ALPHA_NEIGHBORS = 6
CANDIDATE_ACCEPT = 0.5
#: with the candidate and mixed kicks (``kick_type`` 1 and 2), the repair's Lin-Kernighan
#: move is a chain of up to ``KOPT_STEPS`` sequential ``KOPT_MOVE``-opt steps (LKH's
#: basis move) in place of the chain of 3-opt steps (``kick_move``)
KOPT_MOVE = 5
KOPT_STEPS = 5


#: the subgradient steps after the first price the 1-tree on each process's this many
#: nearest links and the first step's tree links only (``alpha_candidates``' ``sparse``):
#: at n = 1,024 on uniform weights the same candidates and bound in 46 ms instead of
#: 106 ms; on cloud-like matrices 85-93% of the same candidates, rings within 0.03%
ALPHA_SPARSE = 16
#: with candidate and mixed kicks (``kick_type`` 1 and 2) the ILS searches the weights
#: penalised by the alpha-nearness ascent (``penalised_weights``): on independent uniform
#: weights at n = 1,024 given 1 s its ring is LKH-3's (runs=1) on 11 of 12 seeds, where the
#: raw weights' was 1.0011x, and at 4,096 given 5 s 1.0001x (was 1.0039x); with window
#: kicks (cloud-like matrices, points in the plane, TSPLIB) the raw weights, whose rings
#: there were as short or shorter
PENALISED_SEARCH = True
#: under a time limit the longer ascent runs only when the time left exceeds this many
#: times the first candidates' (at n = 4,096 on uniform weights, 0.13 s; the ascent's
#: steps then take at most half of what is left)
PENALTY_TIME_FACTOR = 4.0
#: after the kicks, the ring's this many longest links are cut three at a time and the two
#: runs between exchanged where that gains (``long_link_exchanges``): on hierarchical
#: matrices a group the ring visits in two pieces far apart is joined, which neither the
#: local search nor a kick within a window can do (a synthetic cloud of 1,024 VMs in 4
#: pods: 3 of 8 seeds ended with a pod in two pieces, 1.004x the best known ring; joined,
#: 1.0007-1.0009x). Before the kicks too was tried: rings 0.1% shorter or longer from
#: seed to seed (the kicks' path changes), 0.004% longer on average over 21 clouds
LONG_LINKS = 64


def alpha_iterations(n: int) -> int:
    """Subgradient steps for alpha-nearness: 50 up to n = 1024, 20 up to 2048, else 0.

    The first step and the final alpha values are dense O(n^2) spanning trees, the
    steps between them sparse (``ALPHA_SPARSE``); beyond n = 2048 the candidates
    come from the unpenalised tree (alpha on the raw weights). Where the search then
    runs on the penalised weights (``penalty_iterations``) the ascent goes further.
    """
    return 50 if n <= 1024 else 20 if n <= 2048 else 0


def penalty_iterations(n: int) -> int:
    """Subgradient steps for the penalties the search runs on (``penalised_weights``)
    and the candidates that come with them: 100 up to n = 1024, else 200.

    The ascent's progress shows there: on independent uniform weights the 1-tree
    bound is 3% below LKH-3's ring after 50 steps at n = 1,024 and 29% below at
    4,096, 0.1% and 0.5% after 100, 0.03% at 4,096 after 200 (0.6 s there); from
    penalties of 50 steps at n = 4,096 the ring given 5 s was 1.0032x LKH-3's, from
    100 steps 1.0003x, from 200 1.0001x.
    """
    return 100 if n <= 1024 else 200


def candidate_lists(w: NDArray[np.floating], k: int, kind: str = "auto") -> NDArray[np.int64]:
    """The k candidate links of each process, nearest first.

    ``"nearest"``: the k nearest processes. ``"alpha"`` (or ``"auto"``): the
    k alpha-nearest (see ``alpha_iterations``), which also hold the cheapest
    links between groups of close processes; with plain nearest neighbours a
    group larger than k has no candidate link leaving it.
    """
    k = check_positive(k, "k", integer=True)
    if kind not in CANDIDATES:
        raise RankoptInputError(
            f"`kind` must be one of {', '.join(map(repr, CANDIDATES))}; got {kind!r} instead."
        )
    if kind == "nearest":
        return _ring_search.knn_lists(w, k)
    return _ring_search.alpha_candidates(w, k, alpha_iterations(w.shape[0]), ALPHA_SPARSE)[0]


def penalised_weights(
    w: NDArray[np.floating], pi: NDArray[np.float64], nb: NDArray[np.int64]
) -> tuple[NDArray[np.floating], NDArray[np.int64]]:
    """``w[i, j] + pi[i] + pi[j]`` and the candidates ``nb`` sorted by it.

    ``pi``: the node penalties of the subgradient ascent that chose alpha-nearest
    candidates (``_ring_search.alpha_candidates``). Every ring is longer by the
    same ``2 sum(pi)``, so the shortest ring is the same, but the Lin-Kernighan
    steps' positive partial gains, which prune their search, follow the 1-tree
    bound's structure rather than the raw weights (LKH searches on them too).
    The result is exactly symmetric (``w[i, j] + (pi[i] + pi[j])``: the kernels
    read a link from either end, and a ``w[i, j] + pi[i] + pi[j]`` rounded in
    two orders lets a 5-opt repair cycle) and float64 whatever ``w``'s dtype: the
    kernels add float32 weights in float32, and where ``w`` ties exactly (integer
    weights) the penalties turn the ties into differences of a few float32 ulps,
    which rounding reads as gains (a local search that never ended on a matrix of
    integers 0-5 at n = 513); in float64 such differences stay below the kernels'
    tolerance (``matrix_tolerance``).
    """
    ws = np.array(w, dtype=np.float64)
    for i in range(0, ws.shape[0], 512):
        ws[i : i + 512] += pi[i : i + 512, None] + pi[None, :]
    np.fill_diagonal(ws, 0.0)
    order = np.argsort(np.take_along_axis(ws, nb, axis=1), axis=1, kind="stable")
    return ws, np.ascontiguousarray(np.take_along_axis(nb, order, axis=1))


def alpha_neighbors(n: int) -> int:
    """Alpha-nearest candidates per process: ``ALPHA_NEIGHBORS`` (5) up to ``BRIDGE_MAX_N``,
    then ``LARGE_ALPHA_NEIGHBORS`` (6).

    Above n = 2048 the candidates come from the unpenalised tree (no subgradient
    step, ``alpha_iterations``); on independent uniform weights at n = 4,096 a
    sixth candidate gives a ring ~0.15% shorter in the same 5 s (on cloud-like
    matrices ~0.03% shorter, the window kicks 1.4x the cost), at n = 1,024
    (50 subgradient steps) none shorter.
    """
    return ALPHA_NEIGHBORS if n <= BRIDGE_MAX_N else LARGE_ALPHA_NEIGHBORS


def kick_walk(n: int, kick: int) -> float:
    """The ILS's walk for ``kick`` (``kick_type``) at size ``n``: a kick is also kept when
    the ring after its repair is at most this many mean ring links longer than the
    best ring so far (0: only when it is not longer).

    The mixed kicks (2) walk ``BRIDGE_ACCEPT``; candidate kicks alone (1) with alpha
    candidates (up to ``ALPHA_MAX_N``) walk ``CANDIDATE_ACCEPT``: on independent
    uniform weights at n = 4,096 the kicks from each process are soon taken back
    (about 2.5 per process, and then no kick gains any more), and the walk goes on
    gaining. The window kicks and, above ``ALPHA_MAX_N``, the candidate kicks do not walk.
    """
    if kick == 2:
        return BRIDGE_ACCEPT
    if kick == 1 and n <= ALPHA_MAX_N:
        return CANDIDATE_ACCEPT
    return 0.0


def kick_move(kick: int) -> int:
    """The k of the k-opt steps of the Lin-Kernighan move in the ILS with kicks of type
    ``kick`` (``kick_type``): ``KOPT_MOVE`` (5) for the candidate and mixed kicks, 0 (the
    chain of 3-opt steps) for the window kicks.

    On independent uniform weights the 5-opt steps find moves whose every 2- and
    3-opt prefix splits the ring, which no chain of 3-opt steps makes: at n = 1,024
    the ring given 1 s comes about 0.15% closer to LKH-3's (1.0025x -> 1.0011x, seeds
    100-105), at n = 4,096 given 5 s about 0.3%. On cloud-like matrices (window kicks)
    the 5-opt step's search prunes little (many near-equal links) and a solve took
    20x the time for the same ring.
    """
    return KOPT_MOVE if kick in (1, 2) else 0


def default_kicks(n: int) -> int:
    """ILS kicks when ``max_iter`` is not given.

    ``max(min(10 n, 3.6e6 / n), 1000)``, and at least 2000 from n = 200 to
    4096: 10 per process up to n = 600, then a budget that shrinks as 1/n,
    since a kick's repair costs more as n grows (its Lin-Kernighan chains
    read longer rows, and below ``KOPT_VIRTUAL_N`` processes its flips reverse
    O(n) positions of the array tour).
    3,515 kicks at n = 1,024. Above 4096 the floor is 500: at n = 16,384 a
    kick costs milliseconds on uniform matrices, and 500 of them take about
    the time 1000 shallower ones did, for a ring 14% shorter.
    """
    kicks = min(10 * n, 3_600_000 // n)
    if n <= ALPHA_MAX_N:
        return int(max(kicks, min(10 * n, 2000), 1000))
    return int(max(kicks, 500))


def default_polish_kicks(n: int) -> int:
    """Run-exchange kicks of the directed polish when ``max_iter`` is not given.

    ``max(min(5 n, 5e6 / n), 500)``. A polish kick moves a few positions in
    a window of ``DIRECTED_WINDOW`` (tens of microseconds at n = 1,024), far
    cheaper than a symmetric kick, and on asymmetric cloud matrices the
    directed ring keeps shortening over these many kicks.
    """
    return int(max(min(5 * n, 5_000_000 // n), 500))


def _require_ring(model: CostModel, method: str) -> None:
    if model.capabilities.ring is None:
        raise RankoptInputError(
            f"method {method!r} optimises ring objectives ('sum', 'bottleneck'); got objective "
            f"{model.objective!r}. Use method='anneal' or 'auto'."
        )


def _start(
    w: NDArray[np.floating], ctx: SolveContext, nb: NDArray[np.int64] | None = None
) -> NDArray[np.int64]:
    """``init`` if given, else a greedy-edge ring over the candidate links ``nb``
    (a nearest-neighbour walk from a random process when there are none)."""
    if ctx.init is not None:
        return np.array(ctx.init, dtype=np.int64)
    if nb is None:
        return _ring_search.nearest_neighbor(w, int(ctx.gen.integers(w.shape[0])))
    return greedy_ring(w, nb)


def greedy_ring(w: NDArray[np.floating], nb: NDArray[np.int64]) -> NDArray[np.int64]:
    """Greedy-edge construction on the candidate links ``nb`` (k nearest of each process).

    Links are taken shortest first while both ends have a free slot and no
    cycle closes; the fragments are then chained nearest end first. Unlike a
    nearest-neighbour walk it never leaves a process behind to be collected
    far away, so groups of close processes start out contiguous.
    """
    n, k = nb.shape
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst = nb.ravel()
    order = np.argsort(w[src, dst], kind="stable")
    return _ring_search.greedy_edge(
        w, np.ascontiguousarray(src[order]), np.ascontiguousarray(dst[order])
    )


class _Search:
    """Local search / ILS on one weight matrix, with budget and history."""

    def __init__(self, ctx: SolveContext, model: CostModel, neighbors: int, window: int) -> None:
        self.ctx = ctx
        self.model = model
        self.k = neighbors
        self.window = window
        self.iterations = 0
        self.evaluations = 0
        self.stop = "local_optimum"
        self._tol: tuple[NDArray[np.floating], float] | None = None

    def tolerance(self, w: NDArray[np.floating]) -> float:
        """``matrix_tolerance(w)``, kept for the last matrix: an O(n^2) scan that every
        pass and every kick batch on the same matrix would otherwise repeat (at
        n = 16,384, 0.16 s per call)."""
        if self._tol is None or self._tol[0] is not w:
            self._tol = (w, float(_ring_search.matrix_tolerance(w)))
        return self._tol[1]

    def local(
        self,
        w: NDArray[np.floating],
        tour: NDArray[np.int64],
        nb=None,
        threshold: float = LOCAL_PASS_GAIN,
        kopt: int = 0,
        passes: int = LOCAL_PASSES,
    ) -> bool:
        """Local search passes (every process queued) while a pass shortens the ring by
        more than ``threshold`` of its length, at most ``passes``; whether they stopped
        before that many (a pass gained too little, or the time ran out).

        One pass stops when no queued process has an improving move, but a
        reversal changes the orientation of a run against the processes
        outside it, which opens moves at processes it never queued: on
        independent uniform weights (n = 1,024) a second pass shortens the
        ring by 2%, and passes until none gains take it from 1.11x to 1.05x
        LKH-3's length in a few times the first pass's time. Gains per pass
        are uneven: on such weights at n = 4,096, passes of 0.09% and 0.06%
        are followed by one of 0.1%, and ten more passes gain ~0.5% in about
        0.25 s, faster than the kicks would (``CANDIDATE_PASS_GAIN``).
        """
        nb = _ring_search.knn_lists(w, self.k) if nb is None else nb
        length = float(w[tour, np.roll(tour, -1)].sum())
        eps = self.tolerance(w)
        for _ in range(passes):
            gain, ev, mv, st = _ring_search.local_search(
                w, tour, nb, True, self.ctx.remaining(), 0, eps, kopt=kopt, kopt_steps=KOPT_STEPS
            )
            self.evaluations += ev
            self.iterations += mv
            if st == 1:
                self.stop = "time_limit"
                return True
            if -gain <= threshold * length or self.ctx.out_of_time():
                return True
            length += gain  # the pass's delta: the ring's length before the next pass
        return False

    def exchanges(self, w: NDArray[np.floating], tour: NDArray[np.int64], nb=None) -> None:
        """Exchange runs cut at the ring's ``LONG_LINKS`` longest links while one gains
        (``long_link_exchanges``), then local search where one did. Also when the time
        is spent: at most ``LONG_LINKS`` exchanges of O(``LONG_LINKS``^3) each (about
        0.5 ms at 64), and the local search after them stops at the limit."""
        _, ev, mv = _ring_search.long_link_exchanges(w, tour, LONG_LINKS, self.tolerance(w))
        self.evaluations += ev
        self.iterations += mv
        if mv:
            self.local(w, tour, nb)

    def kicks(
        self,
        w: NDArray[np.floating],
        tour: NDArray[np.int64],
        kicks: int,
        nb=None,
        record: bool = True,
        time_share: float = 1.0,
        kick: int = 0,
    ) -> None:
        """``kicks`` ILS kicks (of type ``kick``, see ``kick_type``), within
        ``time_share`` of the time left (if limited)."""
        if kicks <= 0 or self.ctx.out_of_time():
            if self.ctx.out_of_time():
                self.stop = "time_limit"
            return
        nb = _ring_search.knn_lists(w, self.k) if nb is None else nb
        every = max(kicks // 20, 1) if record else 0
        accept = kick_walk(w.shape[0], kick)
        cb = (
            (lambda k, d: self.ctx.record(self.model.cost(tour), self.iterations + k))
            if record
            else None
        )
        _, ev, mv, done, st = _ring_search.iterated_local_search(
            w,
            tour,
            nb,
            kernel_seed(self.ctx.gen),
            kicks,
            self.ctx.remaining() * time_share,
            self.window,
            cb,
            every,
            self.tolerance(w),
            kick,
            accept,
            BRIDGE_SHARE,
            pass_every(w.shape[0], kick),
            1,
            1,
            kick_move(kick),
            KOPT_STEPS,
        )
        self.evaluations += ev
        self.iterations += done
        self.stop = _STOP[st] if st != 0 else self.stop

    def directed(
        self,
        d: NDArray[np.floating],
        tour: NDArray[np.int64],
        nb: NDArray[np.int64],
        kicks: int,
    ) -> MethodOutput:
        """Polish a ring for the asymmetric matrix ``d``, keeping its direction.

        Or-opt and or-3opt moves plus ``kicks`` run-exchange kicks
        (``_ring_directed``); the symmetrised search cannot see which way
        round each link is cheaper.
        """
        tour = np.ascontiguousarray(tour, dtype=np.int64)
        if not self.ctx.out_of_time():
            _, ev, mv, done, st = _ring_directed.directed_search(
                np.ascontiguousarray(d, dtype=np.float64),
                tour,
                nb,
                kernel_seed(self.ctx.gen),
                kicks,
                self.ctx.remaining(),
                DIRECTED_WINDOW,
            )
            self.evaluations += ev
            self.iterations += done
            if st == 1:
                self.stop = "time_limit"
        return self._finish(tour, self.model.cost(tour))

    def output(self, tour: NDArray[np.int64]) -> MethodOutput:
        return self._finish(*best_direction(self.model, tour))

    def _finish(self, order: NDArray[np.int64], cost: float) -> MethodOutput:
        # the search ran on symmetrised (or penalised) weights: it can end
        # worse than the start under the model's own directed cost
        order, cost = no_worse_than_start(self.model, self.ctx, order, cost)
        self.evaluations += 1
        self.ctx.record(cost, self.iterations)
        return MethodOutput(order, self.iterations, self.evaluations, self.stop)


def pass_every(n: int, kick: int) -> int:
    """Kicks between two full local-search passes of the ILS: ``n // PASS_FRACTION``
    (at least 1) with candidate kicks alone (``kick_type`` 1), else none (0).

    The repair after a kick looks only at the processes whose links changed,
    and the moves it keeps open moves elsewhere (a move at ``a`` reads the
    tour neighbours of ``a``'s candidates, and candidate lists are not
    symmetric). On independent uniform weights at n = 4,096, where the
    default budget is about half a kick per process, a pass every 512 kicks
    finds more than the kicks between them; with the mixed kicks of smaller
    rings (many kicks per process) and on cloud-like matrices it does not pay.
    """
    return max(n // PASS_FRACTION, 1) if kick == 1 else 0


def kick_type(w: NDArray[np.floating], tour: NDArray[np.int64], window: int) -> int:
    """The ILS kick for ``w``, judged on a local optimum ``tour``: 1 (two adjacent
    runs swapped whose first two new links are candidate links) when a link between
    processes at most ``window`` apart on the ring weighs more than
    ``CANDIDATE_KICK_RATIO`` ring links on average, and up to ``BRIDGE_MAX_N``
    processes 2 (``BRIDGE_SHARE`` of the kicks a double bridge with two candidate
    links, the rest as 1, and kicks kept up to ``BRIDGE_ACCEPT`` mean ring links
    above the best ring); else 0 (two random runs of at most ``window`` swapped).

    On independent uniform weights the ratio is about 240 and a window kick adds
    three random links the repair must remove: the candidate kick costs a third
    of the time and gives a ring ~0.5% shorter in the same time (n = 1,024). Its
    run swap is a sequential 3-opt move, which the Lin-Kernighan step can take
    back, and the kick from a given process is always the same: at n = 1,024
    the kicks stall after a few thousand. A double bridge costs ~6 times as
    much, but no single move undoes it; mixed in, with the walk, the ring at
    n = 1,024 is ~0.2% shorter in the same time. At n = 4,096 the default
    budget is about half a candidate kick per process, far from the stall, and
    the candidate kicks alone are better (with passes among them, ``pass_every``).
    On cloud-like matrices (ratio ~4) and
    points in the plane (~14) the window kick is the better one.
    """
    ratio = _ring_search.window_link_ratio(w, tour, window, 0)
    if ratio <= CANDIDATE_KICK_RATIO:
        return 0
    return 2 if w.shape[0] <= BRIDGE_MAX_N else 1


def best_direction(model: CostModel, tour: NDArray[np.int64]) -> tuple[NDArray[np.int64], float]:
    """``tour`` or its reverse, whichever ``model`` prices lower, and that cost."""
    rev = tour[::-1].copy()
    cost, cost_rev = model.cost(tour), model.cost(rev)
    return (rev, cost_rev) if cost_rev < cost else (tour, cost)


def _options(ctx: SolveContext) -> tuple[int | None, int, str]:
    """``neighbors`` (None: the default for the kind of candidates), ``window``, ``candidates``."""
    k = ctx.options.get("neighbors")
    window = ctx.options.get("window", DEFAULT_WINDOW)
    kind = ctx.options.get("candidates", "auto")
    if kind not in CANDIDATES:
        raise RankoptInputError(
            f"options['candidates'] must be one of {', '.join(map(repr, CANDIDATES))}; got {kind!r}"
        )
    return (
        None if k is None else check_positive(k, "neighbors", integer=True),
        check_positive(window, "window", integer=True),
        kind,
    )


def _run(
    model: CostModel,
    ctx: SolveContext,
    kicks: int,
    construct_only: bool = False,
    default_budget: bool = False,
) -> MethodOutput:
    k, window, kind = _options(ctx)
    s = _Search(ctx, model, DEFAULT_NEIGHBORS if k is None else k, window)
    caps = model.capabilities
    if caps.ring == "bottleneck" and caps.ring_matrix is not None:
        return _bottleneck(model, ctx, s, kicks, construct_only)
    # the ring sum (or a proxy of the cost: ring_weights without ring_matrix)
    w = caps.ring_weights
    assert w is not None
    if construct_only:
        tour = _start(w, ctx)
        ctx.record(model.cost(tour), 0)
        s.stop = "constructed"
        return s.output(tour)
    if kind == "auto":
        # alpha-nearness (O(n^2) per subgradient step) pays for itself over
        # many kicks, not in one descent, and not on the short ILS of huge n
        kind = "alpha" if kicks > 0 and w.shape[0] <= ALPHA_MAX_N else "nearest"
    if k is None:
        k = alpha_neighbors(w.shape[0]) if kind == "alpha" else DEFAULT_NEIGHBORS
        s.k = k
    t_cand = time.perf_counter()
    nb = candidate_lists(w, k, kind)
    t_cand = time.perf_counter() - t_cand
    tour = _start(w, ctx, nb)
    ctx.record(model.cost(tour), 0)
    # with alpha candidates and kicks the first pass's local optimum judges the kick type
    # (PENALISED_SEARCH): only the window kicks go on with the raw weights' passes
    penalise = kicks > 0 and kind == "alpha" and PENALISED_SEARCH
    settled = s.local(w, tour, nb, passes=1 if penalise else LOCAL_PASSES)
    kick = kick_type(w, tour, window) if kicks > 0 else 0
    ws, nbs = w, nb
    # candidate and mixed kicks (matrices without locality) search the penalised weights
    # of a longer ascent from here on, on its candidates; under a time limit only with
    # time for it (its final dense tree alone costs about what the first candidates
    # did), its steps taking at most half of what is left
    if (
        penalise
        and kick
        and (ctx.time_limit is None or ctx.remaining() > PENALTY_TIME_FACTOR * t_cand)
    ):
        nbp, pi, bound = _ring_search.alpha_candidates(
            w, k, penalty_iterations(w.shape[0]), ALPHA_SPARSE, 0.5 * ctx.remaining()
        )
        if _ring_eval.ring_sum(w, tour) <= bound + s.tolerance(w) * w.shape[0]:
            # the ring is as short as the 1-tree bound: no ring is shorter
            s.stop = "optimal"
            return s.output(tour)
        if np.any(pi):
            ws, nbs = penalised_weights(w, pi, nbp)
        s.local(ws, tour, nbs)
    elif penalise and not settled:  # the passes one call would have made
        s.local(w, tour, nb, passes=LOCAL_PASSES - 1)
    ctx.record(best_direction(model, tour)[1], s.iterations)
    # the model checked symmetry when it symmetrised the matrix
    directed = caps.ring_matrix if caps.ring_sum_exact and caps.directed else None
    if kick == 1 and w.shape[0] <= ALPHA_MAX_N:
        # candidate kicks alone: passes gain faster than kicks until they gain ~nothing
        # (above ALPHA_MAX_N a pass takes a tenth of a second and gains 0.01-0.05%)
        s.local(ws, tour, nbs, CANDIDATE_PASS_GAIN)
    if kick and default_budget:
        # repairs by 5-opt steps (kick_move) cost several times a window kick's
        factor = CANDIDATE_KICK_FACTOR if w.shape[0] > ALPHA_MAX_N else ALPHA_KICK_FACTOR
        kicks = int(kicks * (BRIDGE_KICK_FACTOR if kick == 2 else factor))
    # under a time limit the directed polish keeps a quarter of it
    s.kicks(ws, tour, kicks, nbs, time_share=0.75 if directed is not None else 1.0, kick=kick)
    s.exchanges(ws, tour, nbs)  # after the kicks: it only ever shortens their ring
    if directed is not None:
        polish = kicks // 2 if ctx.max_iter is not None else default_polish_kicks(model.n)
        return s.directed(directed, best_direction(model, tour)[0], nb, polish)
    return s.output(tour)


def _bottleneck(
    model: CostModel, ctx: SolveContext, s: _Search, kicks: int, construct_only: bool
) -> MethodOutput:
    """Threshold search for a model whose cost is the ring bottleneck of ``ring_matrix``.

    Its ``ring_weights`` are ``max(ring_matrix, ring_matrix.T)``.
    """
    w = model.capabilities.ring_weights
    assert w is not None
    n = model.n
    tour = _start(w, ctx)
    if construct_only:
        s.stop = "constructed"
        return s.output(tour)
    nb = _ring_search.knn_lists(w, s.k)
    s.local(w, tour, nb)
    upper = float(w[tour, np.roll(tour, -1)].max())
    ctx.record(best_direction(model, tour)[1], s.iterations)
    off = w + np.diag(np.full(n, np.inf))
    lower = float(np.sort(off, axis=1)[:, 1].max())
    cand = np.unique(w[np.triu_indices(n, 1)])
    cand = cand[(cand >= lower) & (cand <= upper)]
    penalty = float(w.max()) * n + 1.0
    lo, hi = 0, len(cand) - 1
    best = tour
    probe_kicks = min(kicks, max(n, 100))
    while lo < hi and not ctx.out_of_time():
        mid = (lo + hi) // 2
        wt = np.ascontiguousarray(w + penalty * (w > cand[mid]))
        t = best.copy()
        s.local(wt, t)
        if w[t, np.roll(t, -1)].max() > cand[mid]:
            s.kicks(wt, t, probe_kicks, record=False)
        if w[t, np.roll(t, -1)].max() <= cand[mid]:
            hi = mid
            best = t
            ctx.record(best_direction(model, t)[1], s.iterations)
        else:
            lo = mid + 1
    if len(cand):
        wt = np.ascontiguousarray(w + penalty * (w > cand[hi]))
        s.local(wt, best)
        s.kicks(wt, best, kicks, record=False)
    if s.stop == "local_optimum" and lo >= hi:
        s.stop = "threshold_converged"
    return s.output(best)


#: The power of the per-edge step times in the third start ring of ``ring_seed``.
SEED_POWER = 8


def ring_seed(model: CostModel, ctx: SolveContext) -> NDArray[np.int64] | None:
    """A start order for ring schedules under the step models (``time``, ``contention``).

    Solves the ring ``sum`` (ILS, ``n`` kicks) on the per-edge time of one ring
    step, ``latency + (nbytes / n) / bandwidth``, symmetrised: short rings
    keep groups contiguous, which is also what uplink contention rewards.
    Where the model shares uplinks (``capabilities.uplinks``) it solves it
    again with each link's rate capped by the uplinks its transfer leaves and
    enters alone (:func:`alone_rates`), which the pair bandwidth does not show
    (a pod's uplink, narrower than its racks' pairs). A step lasts as long as
    its slowest transfer, and a short ring may keep one slow link (a congested
    VM's): it solves the ring once more on those times to the power
    :data:`SEED_POWER` (scaled to at most 1), whose sum the largest links
    dominate. It keeps the ring the model prices lowest. On clouds of 12 to
    1,024 processes (``synthetic_cloud``) the capped ring cost up to 11% less (four
    pods of four racks: 7 pod crossings -> 4), the power ring up to 28% less
    where 10-30% of VMs are congested (n = 32, 128, 256), and each up to 4%
    more elsewhere, so all are solved.
    ``None`` unless ``model`` declares ``ring_schedule`` and its ``latency``.
    """
    caps = model.capabilities
    if not caps.ring_schedule or caps.latency is None:
        return None
    capped = caps.uplinks is not None and caps.nbytes is not None and bool(caps.groups)

    def step_times(bw: NDArray[np.floating] | None) -> NDArray[np.float64]:
        w = np.array(caps.latency, dtype=np.float64)
        if caps.nbytes is not None and bw is not None:
            w += (caps.nbytes / model.n) / np.where(bw > 0, bw, np.inf)
        w = 0.5 * (w + w.T)
        np.fill_diagonal(w, 0.0)
        return w

    best: tuple[NDArray[np.int64], float] | None = None
    w = step_times(caps.bandwidth)
    for kind in ("pair", "capped", "power") if capped else ("pair", "power"):
        if kind == "capped":
            w = step_times(alone_rates(caps.bandwidth, caps.groups, caps.uplinks))  # type: ignore[arg-type]
        elif kind == "power":  # the last ring's times (capped where the uplinks are shared)
            top = float(w.max())
            if not np.isfinite(top) or top <= 0:
                break
            w = (w / top) ** SEED_POWER
        w = np.ascontiguousarray(w)
        s = _Search(ctx, model, DEFAULT_NEIGHBORS, DEFAULT_WINDOW)
        tour = _ring_search.nearest_neighbor(w, int(ctx.gen.integers(model.n)))
        nb = _ring_search.knn_lists(w, s.k)
        s.local(w, tour, nb)
        s.kicks(w, tour, model.n, nb, record=False)
        found = best_direction(model, tour)
        if best is None or found[1] < best[1]:
            best = found
    assert best is not None
    return best[0]


def alone_rates(
    bandwidth: NDArray[np.floating] | None,
    groups: tuple[NDArray[np.int64], ...],
    uplinks: tuple[NDArray[np.float64], NDArray[np.float64]],
) -> NDArray[np.float64]:
    """The rate of each pair's transfer alone: its ``bandwidth`` (``inf`` without one)
    capped, at every level where the two are in different groups, by the uplink out
    of the sender's group and the one into the receiver's (``uplinks = (out, in)``,
    ``(levels, G)``).

    >>> rack = np.array([0, 0, 1, 1])
    >>> r = alone_rates(np.full((4, 4), 10.0), (rack,), (np.array([[4.0, 6.0]]),) * 2)
    >>> r[0, 1], r[0, 2], r[2, 0]
    (np.float64(10.0), np.float64(4.0), np.float64(4.0))
    """
    out, inn = uplinks
    n = len(groups[0])
    rate = (
        np.full((n, n), np.inf)
        if bandwidth is None
        else np.array(bandwidth, dtype=np.float64, copy=True)
    )
    for lev, lab in enumerate(groups):
        lab = np.asarray(lab)
        cap = np.minimum(out[lev][lab][:, None], inn[lev][lab][None, :])
        np.minimum(rate, np.where(lab[:, None] != lab[None, :], cap, np.inf), out=rate)
    return rate


@register(
    "nearest_neighbor", options=("neighbors", "window", "candidates"), doc="greedy construction"
)
def nearest_neighbor(model: CostModel, ctx: SolveContext) -> MethodOutput:
    _require_ring(model, "nearest_neighbor")
    return _run(model, ctx, 0, construct_only=True)


@register(
    "two_opt",
    options=("neighbors", "window", "candidates"),
    doc="greedy + 2-opt/Or-opt/LK local search",
)
def two_opt(model: CostModel, ctx: SolveContext) -> MethodOutput:
    _require_ring(model, "two_opt")
    return _run(model, ctx, 0)


@register("ils", options=("neighbors", "window", "candidates"), doc="2-opt/Or-opt + Or-3opt kicks")
def ils(model: CostModel, ctx: SolveContext) -> MethodOutput:
    _require_ring(model, "ils")
    kicks = ctx.max_iter if ctx.max_iter is not None else default_kicks(model.n)
    return _run(model, ctx, kicks, default_budget=ctx.max_iter is None)
