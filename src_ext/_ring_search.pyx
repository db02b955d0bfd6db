# Symmetric ring (TSP) local search: 2-opt, Or-opt, sequential 3-opt and
# Lin-Kernighan moves (chains of 3-opt steps) with don't-look bits (a work
# queue of the processes whose links changed), and iterated local search with
# or-3opt kicks (random runs, or runs ending at candidate links) and double
# bridges. The moves are in _ring_moves.pxd, _ring_lk.pxd and _ring_kopt.pxd
# (chains of 5-opt steps, whose moves are made on a virtual tour, _ring_vtour.pxd,
# from KOPT_VIRTUAL_N processes on); the candidate lists and the starting tours
# are built by _ring_candidates and _ring_construct, whose functions this
# module also exports.
#
# All kernels take a symmetric weight matrix ``w`` (the caller symmetrises
# asymmetric input) and a tour as int64 array; they trust their inputs.
#
# Safe for every finite, non-negative weight: the searches for a minimum keep
# an explicit "found" index (never a sentinel value that a weight could
# equal), and a move counts as improving only when it gains more than
# ``tolerance(w)``, a fixed fraction of the largest weight, far above the
# rounding error of a delta, so no sequence of moves can cycle on rounding.

from cython cimport floating
from libc.stdlib cimport malloc, free

from _ring_common cimport (Log, clamp_window, cyc, flip, move_segment, now_s, pred, reverse_path,
                           rng_int, rng_uniform, succ, tolerance, undo_log)
from _ring_kopt cimport KOPT_MAX, kopt_move
from _ring_kopt cimport KOPT_VIRTUAL_N as _KOPT_VIRTUAL_N
from _ring_lk cimport lk_move
from _ring_moves cimport or_opt_move, push, three_opt_move, two_opt_move
from _ring_vtour cimport VTour, vt_at, vt_init, vt_pos, vt_pred, vt_reset, vt_reverse, vt_succ

import numpy as np

from rankopt.solvers._ring_candidates import alpha_candidates, knn_lists
from rankopt.solvers._ring_construct import greedy_edge, nearest_neighbor

#: From this many processes on the k-opt chain's moves are made on a virtual tour
#: (``virtual_n`` of the searches below).
KOPT_VIRTUAL_N = _KOPT_VIRTUAL_N

__all__ = ["KOPT_VIRTUAL_N", "alpha_candidates", "greedy_edge", "iterated_local_search",
           "knn_lists", "local_search", "long_link_exchanges", "matrix_tolerance",
           "nearest_neighbor", "vtour_mismatches", "window_link_ratio"]

# stop codes returned to Python
cdef enum:
    STOP_LOCAL_OPTIMUM = 0
    STOP_TIME_LIMIT = 1
    STOP_MAX_ITER = 2

# kick types of iterated_local_search
cdef enum:
    KICK_WINDOW = 0     # swap two random runs of at most ``window`` positions
    KICK_CANDIDATE = 1  # the segment swap from a random process whose two new links are candidates
    KICK_BRIDGE = 2     # a double bridge with two candidate links (bridge_share), else as 1


cdef double improve_city(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                         const long long[:, ::1] nb, const double *nbw, long long n, long long a,
                         bint use_or, long long *evals, long long *queue,
                         unsigned char *inq, long long *tail, Log *log,
                         double eps, long long breadth, long long breadth2,
                         long long kopt, long long kopt_steps,
                         long long virtual_n) noexcept nogil:
    """Apply the first improving move around ``a``; return its delta (0: none).

    Tried in order: 2-opt; then, with ``use_or``, Or-opt, sequential 3-opt
    (new link at a with t4 on the far side of t3) and the Lin-Kernighan chain
    of 3-opt steps from the link that leaves a (which holds or-3opt), or with
    ``kopt`` (4 or 5) the chain of up to ``kopt_steps`` sequential k-opt steps
    in its place.
    """
    cdef double delta = two_opt_move(w, tour, pos, nb, n, a, evals, queue, inq, tail, log, eps)
    if delta != 0.0 or not use_or:
        return delta
    delta = or_opt_move(w, tour, pos, nb, n, a, evals, queue, inq, tail, log, eps)
    if delta != 0.0:
        return delta
    delta = three_opt_move(w, tour, pos, nb, n, a, False, evals, queue, inq, tail, log, eps)
    if delta != 0.0:
        return delta
    if kopt >= 4 and n >= 2 * KOPT_MAX + 2:
        return kopt_move(w, tour, pos, nb, nbw, n, a, kopt, kopt_steps, evals, queue, inq, tail,
                         log, eps, virtual_n)
    return lk_move(w, tour, pos, nb, nbw, n, a, evals, queue, inq, tail, log, eps, breadth,
                   breadth2)


cdef double run_queue(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                      const long long[:, ::1] nb, const double *nbw, long long n, bint use_or,
                      long long *evals, long long *moves, long long *queue,
                      unsigned char *inq, long long *head, long long *tail,
                      double deadline, long long max_moves, int *stop, Log *log,
                      double eps, long long breadth, long long breadth2,
                      long long kopt, long long kopt_steps, long long virtual_n) noexcept nogil:
    """Pop cities until the queue is empty; returns the total delta."""
    cdef double total = 0.0, delta
    cdef long long a
    while head[0] < tail[0]:
        a = queue[head[0] % n]
        head[0] += 1
        inq[a] = 0
        while True:
            delta = improve_city(w, tour, pos, nb, nbw, n, a, use_or, evals, queue, inq, tail, log,
                                 eps, breadth, breadth2, kopt, kopt_steps, virtual_n)
            if delta == 0.0:
                break
            total += delta
            moves[0] += 1
            if max_moves > 0 and moves[0] >= max_moves:
                stop[0] = STOP_MAX_ITER
                return total
            if (moves[0] & 255) == 0 and deadline > 0 and now_s() > deadline:
                stop[0] = STOP_TIME_LIMIT
                return total
    return total


cdef (long long, long long, long long, long long) _move_settings(
        long long breadth, long long breadth2, long long kopt, long long kopt_steps) noexcept:
    """The Lin-Kernighan move's settings within their ranges: breadths at least 1, ``kopt``
    0 (the chain of 3-opt steps) or 4 .. KOPT_MAX, at least one k-opt step."""
    if kopt < 4:
        kopt = 0
    elif kopt > KOPT_MAX:
        kopt = KOPT_MAX
    return max(breadth, 1), max(breadth2, 1), kopt, max(kopt_steps, 1)


def _candidate_weights(const floating[:, ::1] w, const long long[:, ::1] nb):
    """``w[c, nb[c, k]]`` as a float64 (n, k) array, row by row (the search's cache of them)."""
    cdef Py_ssize_t n = nb.shape[0], K = nb.shape[1], c, k
    out = np.empty((n, max(K, 1)), dtype=np.float64)
    cdef double[:, ::1] o = out
    with nogil:
        for c in range(n):
            for k in range(K):
                o[c, k] = w[c, nb[c, k]]
    return out


def matrix_tolerance(const floating[:, ::1] w):
    """The smallest gain that counts as an improvement on ``w`` (``tolerance``).

    An O(n^2) scan of the matrix: a caller that searches one matrix many
    times computes it once and passes it as ``eps``.
    """
    return tolerance(w)


def window_link_ratio(const floating[:, ::1] w, const long long[::1] tour, long long window,
                      unsigned long long seed, long long samples=256):
    """Mean weight of a link between two processes at most ``window`` positions apart
    on ``tour``, over the mean weight of the ring's links (``samples`` random pairs).

    What a window kick costs in units of a ring link: about 4 on hierarchical
    cloud matrices and 14 on random points in the plane, whose rings keep
    close processes close in the tour, and about 240 on independent uniform
    weights (n = 1,024), where a window kick adds three random links that the
    repair must remove again.
    """
    cdef long long n = tour.shape[0], k, i, _draw
    cdef unsigned long long state = seed
    cdef double ring = 0.0, pairs = 0.0
    if n < 8 or samples < 1:
        return 1.0
    window = clamp_window(window, n, 1)
    with nogil:
        for k in range(n):
            ring += w[tour[k], tour[k + 1 if k + 1 < n else 0]]
        for _draw in range(samples):
            i = rng_int(&state, n)
            pairs += w[tour[i], tour[cyc(i + 1 + rng_int(&state, window), n)]]
    ring /= n
    pairs /= samples
    return pairs / ring if ring > 0.0 else (1.0 if pairs <= 0.0 else float("inf"))


cdef bint candidate_kick(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                         const long long[:, ::1] nb, long long n, unsigned long long *state,
                         long long *ends) noexcept nogil:
    """The ends of a segment swap (see iterated_local_search) whose first two new links
    are candidate links: e0 random, e1 after it, e3 a candidate of e0 and e5 a
    candidate of e2 (the process before e3), the pair of smallest delta. The
    tour e0 [e1..e2] [e3..e4] e5 becomes e0 [e3..e4] [e1..e2] e5 (a sequential
    3-opt move: the or-type case of the Lin-Kernighan step can take it back).
    False when no candidate pair fits."""
    cdef long long K = nb.shape[1], e0, e1, e2, e3, e4, e5, k, j, span3, d5
    cdef long long b3 = -1, b5 = -1
    cdef double d, best = 0.0
    e0 = tour[rng_int(state, n)]
    e1 = succ(tour, pos, e0, n)
    for k in range(K):
        e3 = nb[e0, k]
        span3 = cyc(pos[e3] - pos[e1], n)
        if span3 < 1 or span3 > n - 3:
            continue
        e2 = pred(tour, pos, e3, n)
        for j in range(K):
            e5 = nb[e2, j]
            d5 = cyc(pos[e5] - pos[e1], n)
            if d5 <= span3 or d5 > n - 2:
                continue
            e4 = pred(tour, pos, e5, n)
            d = w[e0, e3] + w[e4, e1] + w[e2, e5] - w[e0, e1] - w[e2, e3] - w[e4, e5]
            if b3 < 0 or d < best:
                best = d
                b3 = e3
                b5 = e5
    if b3 < 0:
        return False
    ends[0] = e0
    ends[1] = e1
    ends[2] = pred(tour, pos, b3, n)
    ends[3] = b3
    ends[4] = pred(tour, pos, b5, n)
    ends[5] = b5
    return True


cdef bint bridge_kick(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                      const long long[:, ::1] nb, long long n, unsigned long long *state,
                      long long *ends) noexcept nogil:
    """The ends of a double bridge: e0 random, e1 after it; for each candidate e5 of
    e0 (e4 before it) a random e2 on e1 .. e4 short of e4 (e3 after it) and each
    candidate e7 of e2 past e5 (e6 before it); the choice of smallest delta. The
    tour e0 [e1..e2] [e3..e4] [e5..e6] e7 becomes e0 [e5..e6] [e3..e4] [e1..e2] e7,
    links (e0,e5), (e4,e1), (e2,e7), (e6,e3) for (e0,e1), (e2,e3), (e4,e5), (e6,e7):
    two 2-exchanges, each of which alone would split the ring, so, unlike the
    segment swap of ``candidate_kick`` (a sequential 3-opt move, which the
    Lin-Kernighan step can take back in one step), no single move of the local
    search undoes it. False when no pair fits."""
    cdef long long K = nb.shape[1], e0, e1, e2, e3, e4, e5, e6, e7, k, j, d5, d7
    cdef long long b5 = -1, b2 = -1, b7 = -1
    cdef double d, best = 0.0
    e0 = tour[rng_int(state, n)]
    e1 = succ(tour, pos, e0, n)
    for k in range(K):
        e5 = nb[e0, k]
        d5 = cyc(pos[e5] - pos[e1], n)
        if d5 < 2 or d5 > n - 3:
            continue
        e4 = pred(tour, pos, e5, n)
        e2 = tour[cyc(pos[e1] + rng_int(state, d5 - 1), n)]  # e1 .. pred(e4)
        e3 = succ(tour, pos, e2, n)
        for j in range(K):
            e7 = nb[e2, j]
            d7 = cyc(pos[e7] - pos[e1], n)
            if d7 <= d5:  # e7 on e5+1 .. e0: D = e5 .. e6 not empty
                continue
            e6 = pred(tour, pos, e7, n)
            d = (w[e0, e5] + w[e4, e1] + w[e2, e7] + w[e6, e3]
                 - w[e0, e1] - w[e2, e3] - w[e4, e5] - w[e6, e7])
            if b5 < 0 or d < best:
                best = d
                b5 = e5
                b2 = e2
                b7 = e7
    if b5 < 0:
        return False
    ends[0] = e0
    ends[1] = e1
    ends[2] = b2
    ends[3] = succ(tour, pos, b2, n)
    ends[4] = pred(tour, pos, b5, n)
    ends[5] = b5
    ends[6] = pred(tour, pos, b7, n)
    ends[7] = b7
    return True


def local_search(const floating[:, ::1] w, long long[::1] tour, const long long[:, ::1] nb,
                 bint use_or=True, double time_limit=0.0, long long max_moves=0,
                 double eps=0.0, long long breadth=1, long long breadth2=1, long long kopt=0,
                 long long kopt_steps=5, long long virtual_n=-1):
    """Improve ``tour`` in place with 2-opt and Or-opt; returns (delta, evals, moves, stop).

    ``eps``: ``matrix_tolerance(w)`` if the caller has it (0: computed here).
    ``breadth``: the Lin-Kernighan move's first step goes on from up to this
    many of its best partial gains (1 to 3); ``breadth2``: its second step.
    ``kopt`` 4 or 5: a chain of up to ``kopt_steps`` sequential k-opt steps
    (``_ring_kopt``) in place of the Lin-Kernighan move (0: that move);
    ``virtual_n``: from this many processes on, the k-opt chain's moves are made on a
    virtual tour, and only a chain that gains on the array (-1: ``KOPT_VIRTUAL_N``,
    5,120; the same rings either way, only the speed differs).
    """
    cdef long long n = tour.shape[0]
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    cdef double[:, ::1] nbw = _candidate_weights(w, nb)
    cdef long long *queue = <long long *>malloc(n * sizeof(long long))
    cdef unsigned char *inq = <unsigned char *>malloc(n * sizeof(unsigned char))
    cdef long long head = 0, tail = 0, evals = 0, moves = 0, k
    cdef int stop = STOP_LOCAL_OPTIMUM
    cdef double total, deadline = now_s() + time_limit if time_limit > 0 else 0.0
    cdef Log log
    log.enabled = False
    log.size = 0
    if queue == NULL or inq == NULL:
        free(queue)
        free(inq)
        raise MemoryError()
    if eps <= 0.0:
        eps = tolerance(w)
    breadth, breadth2, kopt, kopt_steps = _move_settings(breadth, breadth2, kopt, kopt_steps)
    if virtual_n < 0:
        virtual_n = _KOPT_VIRTUAL_N
    with nogil:
        for k in range(n):
            pos[tour[k]] = k
            inq[k] = 0
        for k in range(n):
            push(queue, inq, &tail, n, tour[k])
        total = run_queue(w, tour, pos, nb, &nbw[0, 0], n, use_or, &evals, &moves, queue, inq,
                          &head, &tail, deadline, max_moves, &stop, &log, eps, breadth,
                          breadth2, kopt, kopt_steps, virtual_n)
    free(queue)
    free(inq)
    return total, evals, moves, stop


def iterated_local_search(const floating[:, ::1] w, long long[::1] tour,
                          const long long[:, ::1] nb, unsigned long long seed,
                          long long max_kicks, double time_limit=0.0, long long window=50,
                          callback=None, long long report_every=0, double eps=0.0,
                          int kick=KICK_WINDOW, double accept=0.0,
                          double bridge_share=0.3, long long pass_every=0,
                          long long breadth=1, long long breadth2=1, long long kopt=0,
                          long long kopt_steps=5, long long virtual_n=-1):
    """Kicks (by default: swap two adjacent runs) + local search; keep if not worse.

    ``kick`` 0: the runs are random, of at most ``window`` positions each (for
    matrices whose good rings keep close processes close in the tour); 1: the
    runs start at a random process and end where two new links are candidate
    links (``candidate_kick``; for matrices without that locality, see
    ``window_link_ratio``), else as with 0; 2: with probability
    ``bridge_share`` a double bridge with two candidate links
    (``bridge_kick``), else as with 1.
    ``accept`` > 0: a kick is also kept when the ring after its repair is at
    most ``accept`` mean ring links (of the ring on entry) longer than the
    best ring so far, a walk that leaves a ring no kick improves; the best
    ring is returned.
    ``pass_every`` > 0: every ``pass_every`` kicks, a local-search pass over
    every process before the next kick. A kick's repair looks only at the
    processes whose links it changed, and the moves it keeps open moves at
    processes it never looks at (a candidate list is not symmetric, and a
    move at ``a`` reads the tour neighbours of ``a``'s candidates): on
    independent uniform weights at n = 4,096, where the kicks cover each
    process about once, the passes find more than the kicks between them.
    ``breadth``, ``breadth2``, ``kopt``, ``kopt_steps``, ``virtual_n``: as for
    ``local_search``.
    ``tour`` must be a local optimum on entry and is improved in place.
    ``eps``: ``matrix_tolerance(w)`` if the caller has it (0: computed here).
    Returns (delta, evals, moves, kicks, stop).
    """
    cdef long long n = tour.shape[0]
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    cdef double[:, ::1] nbw = _candidate_weights(w, nb)
    cdef long long *queue = <long long *>malloc(n * sizeof(long long))
    cdef unsigned char *inq = <unsigned char *>malloc(n * sizeof(unsigned char))
    cdef long long head = 0, tail = 0, evals = 0, moves = 0, k, kicks = 0
    cdef long long i1, l1, l2, span, x

    cdef long long ends[8]
    cdef long long nends
    cdef int stop = STOP_MAX_ITER, inner_stop
    cdef unsigned long long state = seed
    cdef double total = 0.0, delta, deadline = now_s() + time_limit if time_limit > 0 else 0.0
    cdef double best = 0.0, thr = 0.0
    cdef long long[::1] best_tour = None
    cdef Log log
    if eps <= 0.0:
        eps = tolerance(w)
    breadth, breadth2, kopt, kopt_steps = _move_settings(breadth, breadth2, kopt, kopt_steps)
    if virtual_n < 0:
        virtual_n = _KOPT_VIRTUAL_N
    if n < 8:
        free(queue)
        free(inq)
        return 0.0, 0, 0, 0, STOP_LOCAL_OPTIMUM
    log.enabled = True
    log.size = 0
    log.cap = 64
    log.i = <long long *>malloc(64 * sizeof(long long))
    log.j = <long long *>malloc(64 * sizeof(long long))
    for k in range(n):
        pos[tour[k]] = k
        inq[k] = 0
    window = clamp_window(window, n, 2)
    if accept > 0.0:
        best_tour = np.array(tour, dtype=np.int64)
        for k in range(n):
            thr += w[tour[k], tour[k + 1 if k + 1 < n else 0]]
        thr *= accept / n
    while kicks < max_kicks:
        with nogil:
            if pass_every > 0 and kicks > 0 and kicks % pass_every == 0:
                log.size = 0
                for x in range(n):
                    push(queue, inq, &tail, n, tour[x])
                inner_stop = STOP_LOCAL_OPTIMUM
                delta = run_queue(w, tour, pos, nb, &nbw[0, 0], n, True, &evals, &moves, queue,
                                  inq, &head, &tail, deadline, 0, &inner_stop, &log, eps,
                                  breadth, breadth2, kopt, kopt_steps, virtual_n)
                while head < tail:  # drain a queue left by a time-out
                    inq[queue[head % n]] = 0
                    head += 1
                total += delta  # never longer: kept
                if accept > 0.0 and total < best - eps:
                    best = total
                    for x in range(n):
                        best_tour[x] = tour[x]
                if inner_stop == STOP_TIME_LIMIT:
                    stop = STOP_TIME_LIMIT
                    break
            nends = 6
            if (kick == KICK_BRIDGE and rng_uniform(&state) < bridge_share
                    and bridge_kick(w, tour, pos, nb, n, &state, ends)):
                nends = 8
            # runs B = [i1, i1+l1) and C = [i1+l1, i1+l1+l2), then A C B D
            elif kick == KICK_WINDOW or not candidate_kick(w, tour, pos, nb, n, &state, ends):
                i1 = rng_int(&state, n)
                l1 = 1 + rng_int(&state, window)
                l2 = 1 + rng_int(&state, window)
                span = l1 + l2
                ends[0] = tour[cyc(i1 - 1, n)]
                ends[1] = tour[i1]
                ends[2] = tour[cyc(i1 + l1 - 1, n)]
                ends[3] = tour[cyc(i1 + l1, n)]
                ends[4] = tour[cyc(i1 + span - 1, n)]
                ends[5] = tour[cyc(i1 + span, n)]
            log.size = 0
            if nends == 8:
                delta = (w[ends[0], ends[5]] + w[ends[4], ends[1]] + w[ends[2], ends[7]]
                         + w[ends[6], ends[3]] - w[ends[0], ends[1]] - w[ends[2], ends[3]]
                         - w[ends[4], ends[5]] - w[ends[6], ends[7]])
                # e0 B C D e7 -> e0 D' C' B' e7, then each run turned back
                flip(tour, pos, n, ends[0], ends[1], ends[6], ends[7], &log)
                flip(tour, pos, n, ends[0], ends[6], ends[5], ends[4], &log)
                flip(tour, pos, n, ends[6], ends[4], ends[3], ends[2], &log)
                flip(tour, pos, n, ends[4], ends[2], ends[1], ends[7], &log)
            else:
                delta = (w[ends[0], ends[3]] + w[ends[4], ends[1]] + w[ends[2], ends[5]]
                         - w[ends[0], ends[1]] - w[ends[2], ends[3]] - w[ends[4], ends[5]])
                move_segment(tour, pos, n, ends[1], ends[2], ends[4], ends[5], False, &log)
            for x in range(nends):
                push(queue, inq, &tail, n, ends[x])
            evals += 1
            inner_stop = STOP_LOCAL_OPTIMUM
            delta += run_queue(w, tour, pos, nb, &nbw[0, 0], n, True, &evals, &moves, queue,
                               inq, &head, &tail, deadline, 0, &inner_stop, &log, eps,
                               breadth, breadth2, kopt, kopt_steps, virtual_n)
            while head < tail:  # drain a queue left by a time-out
                inq[queue[head % n]] = 0
                head += 1
            if delta < -eps or (accept > 0.0 and total + delta < best + thr):
                total += delta
                if accept > 0.0 and total < best - eps:
                    best = total
                    for x in range(n):
                        best_tour[x] = tour[x]
            elif delta > eps:
                undo_log(tour, pos, n, &log)
            kicks += 1
        if callback is not None and report_every > 0 and kicks % report_every == 0:
            callback(kicks, total)
        if inner_stop == STOP_TIME_LIMIT or (deadline > 0 and now_s() > deadline):
            stop = STOP_TIME_LIMIT
            break
    if accept > 0.0 and total > best:
        for x in range(n):
            tour[x] = best_tour[x]
        total = best
    free(log.i)
    free(log.j)
    free(queue)
    free(inq)
    return total, evals, moves, kicks, stop


cdef double _best_segment_exchange(const floating[:, ::1] w, const long long[::1] tour,
                                   const long long *cand, long long m, long long n, double eps,
                                   long long *out) noexcept nogil:
    """The best exchange of two adjacent runs cut at three of the links ``cand``
    (ring positions, ascending: the link from ``tour[p]`` to its successor), each run
    kept or turned round (the four reconnections that change all three links); its
    gain (0.0: none gains more than ``eps``) and ``out`` = (p, q, r, variant). Sums in
    double whatever the weights' type: a float32 sum of three links rounds by more
    than ``eps``, and an exchange of equal links would read as a gain."""
    cdef long long x, y, z, p, q, r, a, a1, b, b1, c, c1
    cdef double best = eps, old, ab, g
    cdef int v
    cdef double gains[4]
    out[0] = -1
    for x in range(m - 2):  # p < q < r: only r may be the last position
        p = cand[x]
        a = tour[p]
        a1 = tour[p + 1]
        for y in range(x + 1, m - 1):
            q = cand[y]
            b = tour[q]
            b1 = tour[q + 1]
            ab = <double>w[a, a1] + <double>w[b, b1]
            for z in range(y + 1, m):
                r = cand[z]
                c = tour[r]
                c1 = tour[r + 1 if r + 1 < n else 0]
                old = ab + <double>w[c, c1]
                # runs S1 = a1 .. b and S2 = b1 .. c between a and c1
                gains[0] = old - (<double>w[a, b1] + <double>w[c, a1]
                                  + <double>w[b, c1])  # S2 S1
                gains[1] = old - (<double>w[a, b1] + <double>w[c, b]
                                  + <double>w[a1, c1])  # S2 S1'
                gains[2] = old - (<double>w[a, c] + <double>w[b1, a1]
                                  + <double>w[b, c1])  # S2' S1
                gains[3] = old - (<double>w[a, b] + <double>w[a1, c]
                                  + <double>w[b1, c1])  # S1' S2'
                for v in range(4):
                    g = gains[v]
                    if g > best:
                        best = g
                        out[0] = p
                        out[1] = q
                        out[2] = r
                        out[3] = v
    return best if out[0] >= 0 else 0.0


cdef void _exchange_runs(long long[::1] tour, long long[::1] pos, long long n, long long p,
                         long long q, long long r, long long v, Log *log) noexcept nogil:
    """Make the exchange ``v`` of ``_best_segment_exchange``: runs S1 = a1 .. b and
    S2 = b1 .. c between a and c1 (a = ``tour[p]``, b = ``tour[q]``, c = ``tour[r]``)
    become S2 S1, S2 S1', S2' S1 or S1' S2' (' turned round), by ``move_segment``
    or two ``flip``."""
    cdef long long a = tour[p], a1 = tour[p + 1], b = tour[q], b1 = tour[q + 1]
    cdef long long c = tour[r], c1 = tour[r + 1 if r + 1 < n else 0]
    if v == 0 or v == 1:  # S1 moved between c and c1
        move_segment(tour, pos, n, a1, b, c, c1, v == 1, log)
    elif v == 2:  # S2 moved, turned round, between a and a1
        move_segment(tour, pos, n, b1, c, a, a1, True, log)
    else:  # each run turned round in place
        flip(tour, pos, n, a, a1, b, b1, log)
        flip(tour, pos, n, a1, b1, c, c1, log)


def long_link_exchanges(const floating[:, ::1] w, long long[::1] tour, long long links,
                        double eps=0.0, long long max_moves=0):
    """Exchange adjacent runs of the ring cut at its ``links`` longest links while one
    gains: each round the best of the four reconnections of every three of them
    (``_best_segment_exchange``), until none gains or ``max_moves`` (0: ``links``)
    were made; ``tour`` changed in place. Returns (delta, evaluations, moves).

    On hierarchical matrices the ring's longest links are where it crosses
    between groups, and a group the ring visits in two pieces far apart (an extra
    crossing of the dearest kind) is joined by one such exchange, which no move
    of the local search (its new links are candidates of their ends, close in
    the ring) nor a kick within a window of the ring can make. O(links^3) per
    round, O(n) to find the links.
    """
    cdef long long n = tour.shape[0], m, moves = 0, evals = 0, k
    cdef long long out[4]
    cdef double total = 0.0, g
    cdef long long[::1] cand
    cdef long long[::1] pos
    cdef Log log
    if n < 8 or links < 3:
        return 0.0, 0, 0
    if eps <= 0.0:
        eps = tolerance(w)
    m = min(links, n)
    if max_moves <= 0:
        max_moves = m
    log.enabled = False
    log.size = 0
    t = np.asarray(tour)
    wn = np.asarray(w)
    pos = np.empty(n, dtype=np.int64)
    for k in range(n):
        pos[tour[k]] = k  # kept by the flips of every exchange
    while moves < max_moves:
        lengths = wn[t, np.roll(t, -1)]
        cand = np.sort(np.argpartition(-lengths, m - 1)[:m]).astype(np.int64)
        with nogil:
            g = _best_segment_exchange(w, tour, &cand[0], m, n, eps, out)
            evals += 4 * m * (m - 1) * (m - 2) // 6
            if g > 0.0:
                _exchange_runs(tour, pos, n, out[0], out[1], out[2], out[3], &log)
        if g <= 0.0:
            break
        total -= g
        moves += 1
    return total, evals, moves


def vtour_mismatches(long long[::1] tour, const long long[:, ::1] flips, long long reset_every=0):
    """Make ``flips`` (rows ``(i, j)``: ``reverse_path`` of ring positions i .. j) on a
    virtual tour over ``tour`` and on a copy of the array, and count the queries
    (position, successor, predecessor and process at each position, after every flip)
    on which the two differ; ``reset_every`` > 0: both start again from ``tour``
    after that many flips. Returns (mismatches, most runs, the virtual ring at the end
    as an array). For tests."""
    cdef long long n = tour.shape[0], f, x, bad = 0, most = 1
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    cdef long long[::1] ref = np.array(tour, dtype=np.int64)
    cdef long long[::1] rpos = np.empty(n, dtype=np.int64)
    cdef long long[::1] ring = np.empty(n, dtype=np.int64)
    cdef VTour vt
    if n < 1 or flips.shape[1] != 2:
        raise ValueError(f"vtour_mismatches: tour must be non-empty and flips (k, 2); got "
                         f"n = {n}, flips of shape {tuple(flips.shape)}")
    if sorted(np.asarray(tour).tolist()) != list(range(n)):
        raise ValueError("vtour_mismatches: tour must be a permutation of 0 .. n - 1")
    if flips.shape[0] and (np.min(flips) < 0 or np.max(flips) >= n):
        raise ValueError(f"vtour_mismatches: flips must be ring positions 0 .. {n - 1}; got "
                         f"{int(np.min(flips))} .. {int(np.max(flips))}")
    for x in range(n):
        pos[tour[x]] = x
        rpos[tour[x]] = x
    vt_init(&vt, &tour[0], &pos[0], n)
    with nogil:
        for f in range(flips.shape[0]):
            if reset_every > 0 and f > 0 and f % reset_every == 0:
                vt_reset(&vt)
                for x in range(n):
                    ref[x] = tour[x]
                    rpos[tour[x]] = x
            reverse_path(ref, rpos, flips[f, 0], flips[f, 1], n)
            vt_reverse(&vt, flips[f, 0], flips[f, 1])
            if vt.nseg > most:
                most = vt.nseg
            for x in range(n):
                if vt_pos(&vt, x) != rpos[x] or vt_at(&vt, x) != ref[x]:
                    bad += 1
                if vt_succ(&vt, x) != succ(ref, rpos, x, n):
                    bad += 1
                if vt_pred(&vt, x) != pred(ref, rpos, x, n):
                    bad += 1
        for x in range(n):
            ring[x] = vt_at(&vt, x)
    return bad, most, np.asarray(ring)
