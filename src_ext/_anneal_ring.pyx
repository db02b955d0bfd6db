# Simulated annealing on a ring: 2-opt, Or-opt (runs of 1-3) and swap moves
# proposed around k-nearest-neighbour candidates, each scored by an O(1) delta
# on a symmetric weight matrix, with a geometric temperature schedule.

from _ring_common cimport (
    now_s, rng_int, rng_uniform, cyc, succ, pred, delta_two_opt, delta_or_opt,
    Log, flip, move_segment,
)

from cython cimport floating
from libc.math cimport exp

import numpy as np

cdef enum:
    MOVE_NONE = -1
    MOVE_TWO_OPT = 0
    MOVE_OR_OPT = 1
    MOVE_SWAP = 2

cdef struct Move:
    int kind
    long long a, b, c, d, s1, s2, p, nx
    bint rev
    double delta


cdef inline double delta_swap(const floating[:, ::1] w, long long[::1] tour,
                              long long[::1] pos, long long n, long long a,
                              long long x) noexcept nogil:
    """Change of the symmetric ring sum when processes a and x trade places."""
    cdef long long ap = pred(tour, pos, a, n), an = succ(tour, pos, a, n)
    cdef long long xp = pred(tour, pos, x, n), xn = succ(tour, pos, x, n)
    if x == an:
        return w[ap, x] + w[a, xn] - w[ap, a] - w[x, xn]
    if x == ap:
        return w[xp, a] + w[x, an] - w[xp, x] - w[a, an]
    return (w[ap, x] + w[x, an] + w[xp, a] + w[a, xn]
            - w[ap, a] - w[a, an] - w[xp, x] - w[x, xn])


cdef void propose(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                  const long long[:, ::1] nb, long long n, unsigned long long *state,
                  Move *mv) noexcept nogil:
    """Draw one random move around a random process and score it."""
    cdef long long K = nb.shape[1], L, e, c, t, _t
    cdef int kind = <int>rng_int(state, 3)
    cdef long long a = rng_int(state, n)
    cdef bint dirn = rng_int(state, 2)
    c = nb[a, rng_int(state, K)]
    mv.kind = MOVE_NONE
    if kind == MOVE_TWO_OPT or n < 8:
        if dirn == 0:
            mv.b = succ(tour, pos, a, n)
            mv.d = succ(tour, pos, c, n)
        else:
            mv.b = pred(tour, pos, a, n)
            mv.d = pred(tour, pos, c, n)
        if c == mv.b or mv.d == a or n < 4:
            return
        mv.a = a
        mv.c = c
        mv.rev = dirn
        mv.delta = delta_two_opt(w, a, mv.b, c, mv.d)
        mv.kind = MOVE_TWO_OPT
    elif kind == MOVE_OR_OPT:
        L = 1 + rng_int(state, 3)
        mv.s1 = a
        mv.s2 = a
        for _t in range(L - 1):
            mv.s2 = succ(tour, pos, mv.s2, n)
        if cyc(pos[c] - pos[mv.s1], n) < L:
            return
        # insert between (c, succ c) with the run's end e next to c, or (pred c, c)
        e = mv.s1 if rng_int(state, 2) == 0 else mv.s2
        if dirn == 0:
            mv.c = c
            mv.d = succ(tour, pos, c, n)
            mv.rev = (e == mv.s2) and mv.s1 != mv.s2
        else:
            mv.c = pred(tour, pos, c, n)
            mv.d = c
            mv.rev = (e == mv.s1) and mv.s1 != mv.s2
        if cyc(pos[mv.d] - pos[mv.s1], n) < L or cyc(pos[mv.c] - pos[mv.s1], n) < L:
            return
        mv.p = pred(tour, pos, mv.s1, n)
        mv.nx = succ(tour, pos, mv.s2, n)
        if mv.c == mv.p:
            return  # reinserting in place
        mv.delta = delta_or_opt(w, mv.p, mv.s1, mv.s2, mv.nx, mv.c, mv.d, mv.rev)
        mv.kind = MOVE_OR_OPT
    else:
        # put a next to c by swapping it with c's neighbour
        t = succ(tour, pos, c, n) if dirn == 0 else pred(tour, pos, c, n)
        if t == a:
            return
        mv.a = a
        mv.b = t
        mv.delta = delta_swap(w, tour, pos, n, a, t)
        mv.kind = MOVE_SWAP


cdef void apply(long long[::1] tour, long long[::1] pos, long long n, Move *mv,
                Log *log) noexcept nogil:
    cdef long long pa, pb
    if mv.kind == MOVE_TWO_OPT:
        if mv.rev == 0:
            flip(tour, pos, n, mv.a, mv.b, mv.c, mv.d, log)
        else:
            flip(tour, pos, n, mv.b, mv.a, mv.d, mv.c, log)
    elif mv.kind == MOVE_OR_OPT:
        move_segment(tour, pos, n, mv.s1, mv.s2, mv.c, mv.d, mv.rev, log)
    elif mv.kind == MOVE_SWAP:
        pa = pos[mv.a]
        pb = pos[mv.b]
        tour[pa] = mv.b
        tour[pb] = mv.a
        pos[mv.b] = pa
        pos[mv.a] = pb


def sample_deltas(const floating[:, ::1] w, long long[::1] tour, const long long[:, ::1] nb,
                  unsigned long long seed, long long count):
    """Deltas of ``count`` random moves from ``tour`` (not applied)."""
    cdef long long n = tour.shape[0], k, got = 0, tries = 0
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    out_np = np.empty(count, dtype=np.float64)
    cdef double[::1] out = out_np
    cdef unsigned long long state = seed
    cdef Move mv
    for k in range(n):
        pos[tour[k]] = k
    with nogil:
        while got < count and tries < 20 * count:
            tries += 1
            propose(w, tour, pos, nb, n, &state, &mv)
            if mv.kind != MOVE_NONE:
                out[got] = mv.delta
                got += 1
    return out_np[:got]


def anneal(const floating[:, ::1] w, long long[::1] tour, const long long[:, ::1] nb,
           unsigned long long seed, long long max_iter, double t0, double t1,
           double time_limit=0.0, callback=None, long long report_every=0):
    """Anneal ``tour`` in place from temperature t0 to t1 over ``max_iter`` proposals.

    ``callback(iterations, delta)`` is called every ``report_every``
    proposals. The deadline is read every few milliseconds of work: the
    number of proposals between two clock reads adapts to their measured
    speed (it decides only when the loop stops, never which moves are made).

    Returns (delta, evaluations, accepted, iterations, stop) with stop 1 for
    the time limit and 2 for the iteration budget.
    """
    cdef long long n = tour.shape[0], k, it = 0, evals = 0, accepted = 0, chunk, end
    cdef long long check = 64, until_check = 64
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    cdef unsigned long long state = seed
    cdef double total = 0.0, temp = t0, factor, deadline = 0.0, t_last = 0.0, t_now
    cdef int stop = 2
    cdef Move mv
    cdef Log log
    log.enabled = False
    log.size = 0
    if time_limit > 0:
        deadline = now_s() + time_limit
        t_last = now_s()
    factor = (t1 / t0) ** (1.0 / max_iter) if max_iter > 0 and t0 > 0 else 1.0
    for k in range(n):
        pos[tour[k]] = k
    chunk = report_every if report_every > 0 else 65536
    while it < max_iter and stop == 2:
        end = min(it + chunk, max_iter)
        with nogil:
            while it < end:
                if deadline > 0:
                    until_check -= 1
                    if until_check <= 0:
                        t_now = now_s()
                        if t_now > deadline:
                            stop = 1
                            break
                        # aim at 1-4 ms of proposals between clock reads
                        if t_now - t_last < 1e-3 and check < (1 << 24):
                            check *= 2
                        elif t_now - t_last > 4e-3 and check > 1:
                            check //= 2
                        t_last = t_now
                        until_check = check
                propose(w, tour, pos, nb, n, &state, &mv)
                it += 1
                temp *= factor
                if mv.kind == MOVE_NONE:
                    continue
                evals += 1
                if mv.delta <= 0.0 or (temp > 0.0 and rng_uniform(&state) < exp(-mv.delta / temp)):
                    apply(tour, pos, n, &mv, &log)
                    total += mv.delta
                    accepted += 1
        if callback is not None:
            callback(it, total)
        if stop == 2 and deadline > 0 and now_s() > deadline:
            stop = 1
    return total, evals, accepted, it, stop
