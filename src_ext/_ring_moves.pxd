# Header-only move searches of the symmetric ring local search (_ring_search):
# the work queue of processes to look at (don't-look bits), and the first
# improving 2-opt, Or-opt and sequential 3-opt move around one process, each
# scored in O(1) from candidate lists before anything moves.
#
# Every move is built from the flips of _ring_common (``flip``,
# ``move_segment``), so it is logged for undo when the log is enabled. A move
# gains only when it gains more than ``eps`` (``tolerance(w)``).

from cython cimport floating

from _ring_common cimport Log, cyc, delta_or_opt, delta_two_opt, flip, move_segment, pred, succ


cdef inline long long along(long long[::1] tour, long long[::1] pos, long long c, long long n,
                            int direction) noexcept nogil:
    """The process after ``c`` when walking the tour forward (``direction`` 0) or back (1)."""
    return succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)


cdef inline void push(long long *queue, unsigned char *inq, long long *tail,
                      long long n, long long c) noexcept nogil:
    """Queue ``c`` unless it is queued (a ring buffer of n entries)."""
    if not inq[c]:
        inq[c] = 1
        queue[tail[0] % n] = c
        tail[0] += 1


cdef inline void push6(long long *queue, unsigned char *inq, long long *tail, long long n,
                       long long a, long long b, long long c, long long d, long long e,
                       long long f) noexcept nogil:
    """Queue the six ends of a 3-opt move."""
    push(queue, inq, tail, n, a)
    push(queue, inq, tail, n, b)
    push(queue, inq, tail, n, c)
    push(queue, inq, tail, n, d)
    push(queue, inq, tail, n, e)
    push(queue, inq, tail, n, f)


cdef inline bint in_run(long long[::1] pos, long long x, long long first, long long last,
                        long long n, int direction) noexcept nogil:
    """Whether ``x`` lies on the run from ``first`` to ``last`` walked in ``direction``."""
    if direction == 0:
        return cyc(pos[x] - pos[first], n) <= cyc(pos[last] - pos[first], n)
    return cyc(pos[first] - pos[x], n) <= cyc(pos[first] - pos[last], n)


cdef inline double two_opt_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                                const long long[:, ::1] nb, long long n, long long a,
                                long long *evals, long long *queue, unsigned char *inq,
                                long long *tail, Log *log, double eps) noexcept nogil:
    """Apply the first improving 2-opt move that drops a link at ``a``; return its delta or 0."""
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long b, c, d
    cdef int direction
    cdef double dab, delta
    for direction in range(2):
        b = along(tour, pos, a, n, direction)
        dab = w[a, b]
        for kk in range(K):
            c = nb[a, kk]
            if w[a, c] >= dab - eps:
                break
            d = along(tour, pos, c, n, direction)
            if c == b or d == a:
                continue
            evals[0] += 1
            delta = delta_two_opt(w, a, b, c, d)
            if delta < -eps:
                if direction == 0:
                    flip(tour, pos, n, a, b, c, d, log)
                else:
                    flip(tour, pos, n, b, a, d, c, log)
                push(queue, inq, tail, n, a)
                push(queue, inq, tail, n, b)
                push(queue, inq, tail, n, c)
                push(queue, inq, tail, n, d)
                return delta
    return 0.0


cdef inline double or_opt_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                               const long long[:, ::1] nb, long long n, long long a,
                               long long *evals, long long *queue, unsigned char *inq,
                               long long *tail, Log *log, double eps) noexcept nogil:
    """Apply the first improving Or-opt move of a run of 1..3 that starts or ends at ``a``.

    The run goes between two adjacent processes, kept or reversed so that
    the end next to the candidate ``c`` is the one whose list holds ``c``.
    Returns its delta or 0.
    """
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long c, s1, s2, p, nx, cc, dd, L, side, e, _e
    cdef int direction, orient
    cdef bint rev
    cdef double delta, g
    if n < 5:
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
            if g <= eps:
                continue
            for orient in range(2):
                # end of the run that will touch c: s1 (orient 0) or s2 (orient 1)
                e = s1 if orient == 0 else s2
                for kk in range(K):
                    c = nb[e, kk]
                    if w[e, c] >= g - eps:
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
                        if delta < -eps:
                            move_segment(tour, pos, n, s1, s2, cc, dd, rev, log)
                            push6(queue, inq, tail, n, p, nx, s1, s2, cc, dd)
                            return delta
    return 0.0


cdef inline double three_opt_move(const floating[:, ::1] w, long long[::1] tour,
                                  long long[::1] pos, const long long[:, ::1] nb, long long n,
                                  long long a, bint exchange, long long *evals,
                                  long long *queue, unsigned char *inq, long long *tail,
                                  Log *log, double eps) noexcept nogil:
    """Apply the first improving sequential 3-opt move around ``a``; return its delta or 0.

    Walking the tour in ``direction`` with b after a, the link (a, b) goes
    for a new link (x, c), c a candidate of x, and the link (c, d), d after
    c, goes too; then a new link (y, e), e a candidate of y, and the third
    link that closes the ring. Both partial gains must stay positive. Two
    families:

    * ``exchange`` False (x = a, y = b): two chained 2-opt moves (LK depth
      3). The first replaces (a,b), (c,d) by (a,c), (b,d), giving
      a c ... b d; instead of keeping (b,d), the second replaces (b,d),
      (e,f) by (b,e), (d,f), where f follows e in that intermediate tour
      (read off the current positions).
    * ``exchange`` True (x = b, y = d): the pure segment exchange, or-3opt,
      no reversal. The tour a b ... e f ... c d becomes a f ... c b ... e d:
      (a,b), (c,d), (e,f) are replaced by (b,c), (d,e), (f,a).
    """
    cdef Py_ssize_t kk, ke, K = nb.shape[1]
    cdef long long b, c, d, e, f, x, y
    cdef int direction
    cdef double gain1, gain2, total
    if n < 8:
        return 0.0
    for direction in range(2):
        b = along(tour, pos, a, n, direction)
        x = b if exchange else a
        for kk in range(K):
            c = nb[x, kk]
            gain1 = w[a, b] - w[x, c]
            if gain1 <= eps:
                break
            d = along(tour, pos, c, n, direction)
            if c == a or c == b or d == a or d == b:
                continue
            gain1 += w[c, d]
            y = d if exchange else b
            for ke in range(K):
                e = nb[y, ke]
                gain2 = gain1 - w[y, e]
                if gain2 <= eps:
                    break
                if exchange:
                    if e == c or not in_run(pos, e, b, c, n, direction):
                        continue
                    f = along(tour, pos, e, n, direction)
                    total = gain2 + w[e, f] - w[a, f]
                else:
                    if e == a or e == c or e == d:
                        continue
                    # f follows e in a c ... b d: the run b .. c is reversed there
                    f = along(tour, pos, e, n,
                              1 - direction if in_run(pos, e, b, c, n, direction) else direction)
                    if f == b or f == d:
                        continue
                    total = gain2 + w[e, f] - w[d, f]
                evals[0] += 1
                if total > eps:
                    if not exchange:
                        flip(tour, pos, n, a, b, c, d, log)
                        flip(tour, pos, n, b, d, e, f, log)
                    elif direction == 0:
                        move_segment(tour, pos, n, b, e, c, d, False, log)
                    else:
                        move_segment(tour, pos, n, e, b, d, c, False, log)
                    push6(queue, inq, tail, n, a, b, c, d, e, f)
                    return -total
    return 0.0
