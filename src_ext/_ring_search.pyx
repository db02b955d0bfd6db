# Ring (TSP) search kernels: neighbour lists, nearest neighbour, 2-opt + Or-opt
# local search with don't-look bits, and iterated local search.
#
# All kernels take a symmetric weight matrix ``w`` (the caller symmetrises
# asymmetric input) and a tour as int64 array; they trust their inputs.

from libc.stdlib cimport malloc, free

from _ring_common cimport (
    now_s, rng_int, cyc, succ, pred, delta_two_opt, delta_or_opt,
    Log, flip, move_segment, undo_log,
)

import numpy as np

cdef double EPS = 1e-12

# stop codes returned to Python
cdef enum:
    STOP_LOCAL_OPTIMUM = 0
    STOP_TIME_LIMIT = 1
    STOP_MAX_ITER = 2


def knn_lists(const double[:, ::1] w, int k):
    """Indices of the k nearest other processes of each process, nearest first."""
    cdef Py_ssize_t n = w.shape[0]
    cdef Py_ssize_t i, j, t, m
    cdef double dij
    if k > n - 1:
        k = n - 1
    out_np = np.empty((n, k), dtype=np.int64)
    cdef long long[:, ::1] out = out_np
    cdef double *best = <double *>malloc(k * sizeof(double))
    if best == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            m = 0
            for j in range(n):
                if j == i:
                    continue
                dij = w[i, j]
                if m == k and dij >= best[k - 1]:
                    continue
                t = m if m < k else k - 1
                # insertion into the sorted prefix
                while t > 0 and best[t - 1] > dij:
                    best[t] = best[t - 1]
                    out[i, t] = out[i, t - 1]
                    t -= 1
                best[t] = dij
                out[i, t] = j
                if m < k:
                    m += 1
    free(best)
    return out_np


def nearest_neighbor(const double[:, ::1] w, long long start):
    """Nearest-neighbour tour from ``start``; O(n^2)."""
    cdef Py_ssize_t n = w.shape[0]
    tour_np = np.empty(n, dtype=np.int64)
    cdef long long[::1] tour = tour_np
    cdef unsigned char[::1] used = np.zeros(n, dtype=np.uint8)
    cdef long long cur = start, nxt, j, k
    cdef double best
    with nogil:
        tour[0] = cur
        used[cur] = 1
        for k in range(1, n):
            best = 1e308
            nxt = -1
            for j in range(n):
                if not used[j] and w[cur, j] < best:
                    best = w[cur, j]
                    nxt = j
            tour[k] = nxt
            used[nxt] = 1
            cur = nxt
    return tour_np


cdef inline void push(long long *queue, unsigned char *inq, long long *tail,
                      long long n, long long c) noexcept nogil:
    if not inq[c]:
        inq[c] = 1
        queue[tail[0] % n] = c
        tail[0] += 1


cdef inline bint in_run(long long[::1] pos, long long x, long long first, long long last,
                        long long n, int direction) noexcept nogil:
    """Whether ``x`` lies on the run from ``first`` to ``last`` walked in ``direction``."""
    if direction == 0:
        return cyc(pos[x] - pos[first], n) <= cyc(pos[last] - pos[first], n)
    return cyc(pos[first] - pos[x], n) <= cyc(pos[first] - pos[last], n)


cdef double sequential_3opt(const double[:, ::1] w, long long[::1] tour, long long[::1] pos,
                            const long long[:, ::1] nb, long long n, long long a,
                            long long *evals, long long *queue, unsigned char *inq,
                            long long *tail, Log *log) noexcept nogil:
    """Two chained 2-opt moves (a sequential 3-opt move, LK depth 3) around ``a``.

    Walking the tour in ``direction`` with b after a: the first move replaces
    (a,b), (c,d) by (a,c), (b,d), d after c, giving a c ... b d; instead of
    keeping (b,d), the second replaces (b,d), (e,f) by (b,e), (d,f), where f
    follows e in that intermediate tour (worked out from positions, nothing is
    moved until the whole move gains). Returns the (negative) delta or 0.
    """
    cdef Py_ssize_t kk, ke, K = nb.shape[1]
    cdef long long b, c, d, e, f
    cdef int direction
    cdef double gain1, gain2, total
    if n < 8:
        return 0.0
    for direction in range(2):
        b = succ(tour, pos, a, n) if direction == 0 else pred(tour, pos, a, n)
        for kk in range(K):
            c = nb[a, kk]
            gain1 = w[a, b] - w[a, c]
            if gain1 <= EPS:
                break
            d = succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)
            if c == b or d == a:
                continue
            gain1 += w[c, d]
            for ke in range(K):
                e = nb[b, ke]
                gain2 = gain1 - w[b, e]
                if gain2 <= EPS:
                    break
                if e == a or e == c or e == d:
                    continue
                # f follows e in the intermediate tour a c ... b d
                if in_run(pos, e, b, c, n, direction):
                    f = pred(tour, pos, e, n) if direction == 0 else succ(tour, pos, e, n)
                else:
                    f = succ(tour, pos, e, n) if direction == 0 else pred(tour, pos, e, n)
                if f == b or f == d:
                    continue
                evals[0] += 1
                total = gain2 + w[e, f] - w[d, f]
                if total > EPS:
                    flip(tour, pos, n, a, b, c, d, log)
                    flip(tour, pos, n, b, d, e, f, log)
                    push(queue, inq, tail, n, a)
                    push(queue, inq, tail, n, b)
                    push(queue, inq, tail, n, c)
                    push(queue, inq, tail, n, d)
                    push(queue, inq, tail, n, e)
                    push(queue, inq, tail, n, f)
                    return -total
    return 0.0


cdef double improve_city(const double[:, ::1] w, long long[::1] tour, long long[::1] pos,
                         const long long[:, ::1] nb, long long n, long long a,
                         bint use_or, long long *evals, long long *queue,
                         unsigned char *inq, long long *tail, Log *log) noexcept nogil:
    """Apply the first improving 2-opt or Or-opt move around ``a``; return its delta."""
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long b, c, d, s1, s2, p, nx, cc, dd, L, side, e, _e
    cdef int direction, orient
    cdef bint rev
    cdef double dab, delta, g
    # --- 2-opt, both tour directions
    for direction in range(2):
        b = succ(tour, pos, a, n) if direction == 0 else pred(tour, pos, a, n)
        dab = w[a, b]
        for kk in range(K):
            c = nb[a, kk]
            if w[a, c] >= dab - EPS:
                break
            d = succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)
            if c == b or d == a:
                continue
            evals[0] += 1
            delta = delta_two_opt(w, a, b, c, d)
            if delta < -EPS:
                if direction == 0:
                    flip(tour, pos, n, a, b, c, d, log)
                else:
                    flip(tour, pos, n, b, a, d, c, log)
                push(queue, inq, tail, n, a)
                push(queue, inq, tail, n, b)
                push(queue, inq, tail, n, c)
                push(queue, inq, tail, n, d)
                return delta
    if not use_or or n < 5:
        return 0.0
    # --- Or-opt: runs of 1..3 that start or end at a
    for L in range(1, 4):
        if L + 3 > n:
            break
        for side in range(2):
            if side == 0:
                s1 = a
                s2 = a
                for _e in range(L - 1):
                    s2 = succ(tour, pos, s2, n)
            else:
                if L == 1:
                    continue
                s2 = a
                s1 = a
                for _e in range(L - 1):
                    s1 = pred(tour, pos, s1, n)
            p = pred(tour, pos, s1, n)
            nx = succ(tour, pos, s2, n)
            g = w[p, s1] + w[s2, nx] - w[p, nx]
            if g <= EPS:
                continue
            for orient in range(2):
                # end of the run that will touch c: s1 (orient 0) or s2 (orient 1)
                e = s1 if orient == 0 else s2
                for kk in range(K):
                    c = nb[e, kk]
                    if w[e, c] >= g - EPS:
                        break
                    if cyc(pos[c] - pos[s1], n) < L:
                        continue  # c inside the run
                    for direction in range(2):
                        # insert between (c, succ c) or (pred c, c)
                        if direction == 0:
                            cc = c
                            dd = succ(tour, pos, c, n)
                        else:
                            cc = pred(tour, pos, c, n)
                            dd = c
                        if cyc(pos[dd] - pos[s1], n) < L or cyc(pos[cc] - pos[s1], n) < L:
                            continue
                        # e must be adjacent to c: the run's orientation follows
                        if direction == 0:
                            # cc=c, run starts next to c with e
                            rev = (e == s2)
                        else:
                            # dd=c, run ends next to c with e
                            rev = (e == s1)
                        evals[0] += 1
                        delta = delta_or_opt(w, p, s1, s2, nx, cc, dd, rev)
                        if delta < -EPS:
                            move_segment(tour, pos, n, s1, s2, cc, dd, rev, log)
                            push(queue, inq, tail, n, p)
                            push(queue, inq, tail, n, nx)
                            push(queue, inq, tail, n, s1)
                            push(queue, inq, tail, n, s2)
                            push(queue, inq, tail, n, cc)
                            push(queue, inq, tail, n, dd)
                            return delta
    return sequential_3opt(w, tour, pos, nb, n, a, evals, queue, inq, tail, log)


cdef double run_queue(const double[:, ::1] w, long long[::1] tour, long long[::1] pos,
                      const long long[:, ::1] nb, long long n, bint use_or,
                      long long *evals, long long *moves, long long *queue,
                      unsigned char *inq, long long *head, long long *tail,
                      double deadline, long long max_moves, int *stop, Log *log) noexcept nogil:
    """Pop cities until the queue is empty; returns the total delta."""
    cdef double total = 0.0, delta
    cdef long long a
    while head[0] < tail[0]:
        a = queue[head[0] % n]
        head[0] += 1
        inq[a] = 0
        while True:
            delta = improve_city(w, tour, pos, nb, n, a, use_or, evals, queue, inq, tail, log)
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


def local_search(const double[:, ::1] w, long long[::1] tour, const long long[:, ::1] nb,
                 bint use_or=True, double time_limit=0.0, long long max_moves=0):
    """Improve ``tour`` in place with 2-opt and Or-opt; returns (delta, evals, moves, stop)."""
    cdef long long n = tour.shape[0]
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
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
    with nogil:
        for k in range(n):
            pos[tour[k]] = k
            inq[k] = 0
        for k in range(n):
            push(queue, inq, &tail, n, tour[k])
        total = run_queue(w, tour, pos, nb, n, use_or, &evals, &moves, queue, inq,
                          &head, &tail, deadline, max_moves, &stop, &log)
    free(queue)
    free(inq)
    return total, evals, moves, stop


def iterated_local_search(const double[:, ::1] w, long long[::1] tour,
                          const long long[:, ::1] nb, unsigned long long seed,
                          long long max_kicks, double time_limit=0.0, long long window=50,
                          callback=None, long long report_every=0):
    """Or-3opt kicks (swap two short adjacent runs) + local search; keep if not worse.

    ``tour`` must be a local optimum on entry and is improved in place.
    Returns (delta, evals, moves, kicks, stop).
    """
    cdef long long n = tour.shape[0]
    cdef long long[::1] pos = np.empty(n, dtype=np.int64)
    cdef long long *queue = <long long *>malloc(n * sizeof(long long))
    cdef unsigned char *inq = <unsigned char *>malloc(n * sizeof(unsigned char))
    cdef long long head = 0, tail = 0, evals = 0, moves = 0, k, kicks = 0
    cdef long long i1, l1, l2, span, x

    cdef long long ends[6]
    cdef int stop = STOP_MAX_ITER, inner_stop
    cdef unsigned long long state = seed
    cdef double total = 0.0, delta, deadline = now_s() + time_limit if time_limit > 0 else 0.0
    cdef Log log
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
    if window > n // 2 - 1:
        window = n // 2 - 1
    if window < 2:
        window = 2
    while kicks < max_kicks:
        with nogil:
            # runs B = [i1, i1+l1) and C = [i1+l1, i1+l1+l2), then A C B D
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
            delta = (w[ends[0], ends[3]] + w[ends[4], ends[1]] + w[ends[2], ends[5]]
                     - w[ends[0], ends[1]] - w[ends[2], ends[3]] - w[ends[4], ends[5]])
            log.size = 0
            move_segment(tour, pos, n, ends[1], ends[2], ends[4], ends[5], False, &log)
            for x in range(6):
                push(queue, inq, &tail, n, ends[x])
            evals += 1
            inner_stop = STOP_LOCAL_OPTIMUM
            delta += run_queue(w, tour, pos, nb, n, True, &evals, &moves, queue, inq,
                               &head, &tail, deadline, 0, &inner_stop, &log)
            while head < tail:  # drain a queue left by a time-out
                inq[queue[head % n]] = 0
                head += 1
            if delta < -EPS:
                total += delta
            elif delta > EPS:
                undo_log(tour, pos, n, &log)
            kicks += 1
        if callback is not None and report_every > 0 and kicks % report_every == 0:
            callback(kicks, total)
        if inner_stop == STOP_TIME_LIMIT or (deadline > 0 and now_s() > deadline):
            stop = STOP_TIME_LIMIT
            break
    free(log.i)
    free(log.j)
    free(queue)
    free(inq)
    return total, evals, moves, kicks, stop
