# Header-only Lin-Kernighan move of the symmetric ring local search
# (_ring_search): a chain of at most LK_MAX_DEPTH 2-opt flips that drops a
# link at one process, each level adding a candidate link with positive
# partial gain, kept as soon as the closed ring is shorter. Levels 0 and 1 are
# scored without moving anything; deeper levels flip a virtual tour.
#
# Virtual tour: a long flip of a move under trial is not applied to the array
# (it would cost up to n/2 swaps, and nearly all trial flips are taken back);
# it is kept as a reversed cyclic position interval, and the trial reads the
# tour through the list of them: a process's position is mapped through the
# reversals in order, a position's process back through them in reverse
# order, O(depth) per query. Short flips (at most max(LK_ARRAY_FLIP,
# n / LK_ARRAY_FRACTION) positions) cost less on the array than the lookups
# through them, so the flips of a trial up to its first long one are done on
# the array. Taking a flip back
# pops it (reversing it again if it was done). Only a move that gains is
# applied in full, with exactly the reversals (including reverse_path's
# choice of the shorter side) array flips would have made, so the search
# reads the same tours as with array flips.

from cython cimport floating
from libc.math cimport INFINITY, NAN

from _ring_common cimport Log, log_reversal, pred, reverse_path, succ
from _ring_moves cimport along, in_run, push


# Lin-Kernighan move: at most LK_MAX_DEPTH flips; level 0 tries 3 first links,
# level 1 closes at the best of all its candidates or descends from the 2 most
# promising, deeper levels from 1. Deep chains are what find the improving
# moves of a matrix without locality (independent random weights); they cost
# little (breadth 1), while the breadth of the first level multiplies the work
# at every process where no move gains. On independent uniform weights depth
# 10 / breadth 3 reaches in 0.7 s of ILS a ring shorter than depth 5 / breadth
# 5 does in 2.2 s at n = 1,024, and 8x closer to the best at 4,096; on
# hierarchical cloud matrices the two gain alike per second
# (bench/bench_ring_kicks.py).
cdef enum:
    LK_MAX_DEPTH = 10
    LK_BREADTH_1 = 3
    LK_BREADTH_2 = 2
    # flips up to max(LK_ARRAY_FLIP, n / LK_ARRAY_FRACTION) positions are
    # done on the array during a trial
    LK_ARRAY_FLIP = 32
    LK_ARRAY_FRACTION = 8


cdef struct LKState:
    long long t1
    long long n
    long long ni            # flips of the move (entries in fi / fj, va / vl)
    long long nphys         # the first nphys of them are done on the array, the rest virtual
    long long array_flip    # the longest flip done on the array during a trial
    long long fi[16]        # the reverse_path arguments of each flip
    long long fj[16]
    long long va[16]        # the interval it reverses: first position, length
    long long vl[16]
    long long added_a[16]   # links added so far (t2, t3)
    long long added_b[16]
    long long touched[64]
    long long nt
    double eps              # smallest gain that counts
    const double *nbw       # nbw[c * K + k] = w[c, nb[c, k]]: the candidate links' weights
    long long K


cdef inline long long v_map(LKState *st, long long k, long long p) noexcept nogil:
    """Position ``p`` after (or, the map being its own inverse, before) flip ``k``."""
    cdef long long o = p - st.va[k], L = st.vl[k], n = st.n
    if o < 0:
        o += n
    if o >= L:
        return p
    p = st.va[k] + L - 1 - o
    return p - n if p >= n else p


cdef inline long long v_pos(long long[::1] pos, LKState *st, long long c) noexcept nogil:
    """Position of ``c`` in the virtual tour."""
    cdef long long p = pos[c], k
    for k in range(st.nphys, st.ni):
        p = v_map(st, k, p)
    return p


cdef inline long long v_at(long long[::1] tour, LKState *st, long long p) noexcept nogil:
    """Process at position ``p`` of the virtual tour."""
    cdef long long k
    for k in range(st.ni - 1, st.nphys - 1, -1):
        p = v_map(st, k, p)
    return tour[p]


cdef inline long long v_succ(long long[::1] tour, long long[::1] pos, LKState *st,
                             long long c) noexcept nogil:
    if st.nphys == st.ni:
        return succ(tour, pos, c, st.n)
    cdef long long p = v_pos(pos, st, c) + 1
    return v_at(tour, st, 0 if p == st.n else p)


cdef inline long long v_pred(long long[::1] tour, long long[::1] pos, LKState *st,
                             long long c) noexcept nogil:
    if st.nphys == st.ni:
        return pred(tour, pos, c, st.n)
    cdef long long p = v_pos(pos, st, c) - 1
    return v_at(tour, st, st.n - 1 if p < 0 else p)


cdef inline void lk_flip(long long[::1] tour, long long[::1] pos, LKState *st, long long a,
                         long long b, long long c, long long d) noexcept nogil:
    """flip() on the virtual tour: appends the reversal reverse_path would make.

    Done on the array too while every flip before it is and it is short.
    """
    cdef long long n = st.n, i, j, length
    if st.nphys == st.ni:  # no virtual flip: read the array
        if succ(tour, pos, a, n) == b:
            i = pos[b]
            j = pos[c]
        else:
            i = pos[a]
            j = pos[d]
    elif v_succ(tour, pos, st, a) == b:
        i = v_pos(pos, st, b)
        j = v_pos(pos, st, c)
    else:
        i = v_pos(pos, st, a)
        j = v_pos(pos, st, d)
    st.fi[st.ni] = i
    st.fj[st.ni] = j
    # the side reverse_path reverses: i..j, or its complement when longer than n/2
    length = j - i + 1 if j >= i else j - i + 1 + n
    if 2 * length > n:
        st.va[st.ni] = j + 1 if j + 1 < n else 0
        st.vl[st.ni] = n - length
    else:
        st.va[st.ni] = i
        st.vl[st.ni] = length
    if st.nphys == st.ni and st.vl[st.ni] <= st.array_flip:
        reverse_path(tour, pos, i, j, n)
        st.nphys += 1
    st.ni += 1


cdef inline void lk_pop(long long[::1] tour, long long[::1] pos, LKState *st,
                        long long mark) noexcept nogil:
    """Take back the flips after the first ``mark``."""
    while st.ni > mark:
        st.ni -= 1
        if st.ni < st.nphys:
            reverse_path(tour, pos, st.fi[st.ni], st.fj[st.ni], st.n)
            st.nphys = st.ni


cdef inline double lk_w(const floating[:, ::1] w, const long long[:, ::1] nb, LKState *st,
                        long long a, long long b) noexcept nogil:
    """w[a, b], read from a's candidate row when b is one of its candidates.

    The links of a good ring are nearly all candidate links, and a's row of
    ``nb`` and ``nbw`` is a few contiguous words, where w[a, b] is a cache
    miss once the matrix outgrows the cache. The value is the same.
    """
    cdef long long k, K = st.K
    cdef const long long *row = &nb[a, 0]
    for k in range(K):
        if row[k] == b:
            return st.nbw[a * K + k]
    return w[a, b]


cdef inline bint lk_added(LKState *st, long long level, long long x, long long y) noexcept nogil:
    cdef long long k
    for k in range(level):
        if ((st.added_a[k] == x and st.added_b[k] == y)
                or (st.added_a[k] == y and st.added_b[k] == x)):
            return True
    return False


cdef inline long long lk_candidates(const floating[:, ::1] w, long long[::1] tour,
                                    long long[::1] pos, const long long[:, ::1] nb,
                                    LKState *st, long long t2, double gain, long long level,
                                    long long *c3, long long *c4, double *score,
                                    double *d23, double *d34) noexcept nogil:
    """Candidates (t3, t4) for dropping (t1, t2): positive partial gain, not tabu.

    t4 is the neighbour of t3 on the side that keeps the ring valid after the
    flip; the score is the lookahead w(t3, t4) - w(t2, t3), and d23, d34 get
    those two weights. Returns how many.
    """
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long t1 = st.t1, t3, t4, m = 0
    cdef double c23, c34
    cdef bint fwd_order = v_succ(tour, pos, st, t1) == t2
    for kk in range(K):
        if m == 16:
            break
        t3 = nb[t2, kk]
        c23 = st.nbw[t2 * K + kk]
        if gain - c23 <= st.eps:
            break
        if t3 == t1 or t3 == t2:
            continue
        t4 = v_pred(tour, pos, st, t3) if fwd_order else v_succ(tour, pos, st, t3)
        if t4 == t2 or lk_added(st, level, t3, t4):
            continue
        c3[m] = t3
        c4[m] = t4
        c34 = lk_w(w, nb, st, t3, t4)
        d23[m] = c23
        d34[m] = c34
        score[m] = c34 - c23
        m += 1
    return m


cdef inline long long take_best(double *score, long long m) noexcept nogil:
    """Index of the best-scored candidate not taken yet (then marked taken), or -1.

    A taken candidate's score becomes NaN, which no comparison selects.
    """
    cdef long long k, pick = -1
    cdef double best = -INFINITY
    for k in range(m):
        if score[k] == score[k] and (pick < 0 or score[k] > best):
            best = score[k]
            pick = k
    if pick >= 0:
        score[pick] = NAN
    return pick


cdef inline long long lk_next(double *score, long long m, const long long *ca,
                              const long long *cb, long long *a, long long *b,
                              long long *evals) noexcept nogil:
    """Take the best candidate pair left (``take_best``) into ``a``, ``b`` and
    count its evaluation; returns its index, -1 when none is left."""
    cdef long long pick = take_best(score, m)
    if pick < 0:
        return -1
    a[0] = ca[pick]
    b[0] = cb[pick]
    evals[0] += 1
    return pick


cdef inline double lk_step(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                           const long long[:, ::1] nb, LKState *st, long long t2, double gain,
                           long long level, long long *evals) noexcept nogil:
    """One level of a Lin-Kernighan move built from 2-opt flips.

    The link (t1, t2) is to go (t2 next to t1 in the current tour); for a
    candidate t3 of t2 with positive partial gain, the flip that adds (t2, t3)
    and drops (t3, t4) leaves a valid ring with the closing link (t1, t4). The
    first ring shorter than at the start is kept (returns its gain, its flips
    still on the virtual tour); else the flips of this level are taken back
    and 0 is returned. Breadth LK_BREADTH_1, LK_BREADTH_2, then 1.
    """
    cdef long long t1 = st.t1, t3, t4, mark, _b
    cdef long long cand3[16]
    cdef long long cand4[16]
    cdef double score[16]
    cdef double d23[16]
    cdef double d34[16]
    cdef double g2, close, r
    cdef long long pick, ncand = 0, breadth = (
        LK_BREADTH_1 if level == 0 else LK_BREADTH_2 if level == 1 else 1)
    ncand = lk_candidates(w, tour, pos, nb, st, t2, gain, level, cand3, cand4, score, d23, d34)
    for _b in range(breadth):
        # the best remaining candidate by the lookahead rule
        pick = lk_next(score, ncand, cand3, cand4, &t3, &t4, evals)
        if pick < 0:
            return 0.0
        mark = st.ni
        lk_flip(tour, pos, st, t1, t2, t4, t3)
        st.added_a[level] = t2
        st.added_b[level] = t3
        g2 = gain - d23[pick] + d34[pick]
        close = g2 - w[t1, t4]
        if st.nt + 3 <= 64:
            st.touched[st.nt] = t2
            st.touched[st.nt + 1] = t3
            st.touched[st.nt + 2] = t4
            st.nt += 3
        if close > st.eps:
            return close
        if level + 1 < LK_MAX_DEPTH:
            r = lk_step(w, tour, pos, nb, st, t4, g2, level + 1, evals)
            if r > 0.0:
                return r
        lk_pop(tour, pos, st, mark)
        st.nt -= 3 if st.nt >= 3 else 0
    return 0.0


cdef inline void lk_two_flips(long long[::1] tour, long long[::1] pos, LKState *st,
                              long long t2, long long t3, long long t4, long long t5,
                              long long t6) noexcept nogil:
    """Apply levels 0 and 1: add (t2, t3) and (t4, t5), drop (t3, t4) and (t5, t6)."""
    lk_flip(tour, pos, st, st.t1, t2, t4, t3)
    lk_flip(tour, pos, st, st.t1, t4, t6, t5)
    st.added_a[0] = t2
    st.added_b[0] = t3
    st.added_a[1] = t4
    st.added_b[1] = t5
    st.touched[0] = t3
    st.touched[1] = t4
    st.touched[2] = t5
    st.touched[3] = t6
    st.nt = 4


cdef inline double lk_first_levels(const floating[:, ::1] w, long long[::1] tour,
                                   long long[::1] pos, const long long[:, ::1] nb, LKState *st,
                                   long long t2, long long *evals) noexcept nogil:
    """Levels 0 and 1 of the Lin-Kernighan move, scored without moving anything.

    In the orientation with t2 after t1 the ring reads t1 t2 .. t4 t3 .. ;
    the first flip would give t1 t4 .. t2 t3 .. (the run t2..t4 reversed), so
    the node before any t5 in that ring is read off the current positions.
    Only a move that gains, or the descent to level 2, touches the tour.
    """
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long n = st.n, t1 = st.t1, t3, t4, t5, t6, _b1, _b2, mark
    cdef int direction = 0 if succ(tour, pos, t1, n) == t2 else 1
    cdef long long c3[16]
    cdef long long c4[16]
    cdef double s0[16]
    cdef double d23[16]
    cdef double d34[16]
    cdef long long c5[16]
    cdef long long c6[16]
    cdef double s1[16]
    cdef double d45[16]
    cdef double d56[16]
    cdef double gain = lk_w(w, nb, st, t1, t2), g2, g3, best_close, r, c41, c45, c56, cl
    cdef long long n0 = 0, n1, close_pick, pick
    n0 = lk_candidates(w, tour, pos, nb, st, t2, gain, 0, c3, c4, s0, d23, d34)
    for _b1 in range(LK_BREADTH_1):
        pick = lk_next(s0, n0, c3, c4, &t3, &t4, evals)
        if pick < 0:
            return 0.0
        g2 = gain - d23[pick] + d34[pick]
        c41 = w[t1, t4]
        if g2 - c41 > st.eps:  # a 2-opt move
            lk_flip(tour, pos, st, t1, t2, t4, t3)
            st.touched[0] = t3
            st.touched[1] = t4
            st.nt = 2
            return g2 - c41
        # level 1 from t4, in the ring after the first flip
        n1 = 0
        best_close = 0.0
        close_pick = -1
        for kk in range(K):
            if n1 == 16:
                break
            t5 = nb[t4, kk]
            c45 = st.nbw[t4 * st.K + kk]
            g3 = g2 - c45
            if g3 <= st.eps:
                break
            if t5 == t1 or t5 == t4 or t5 == t3:
                continue
            if in_run(pos, t5, t2, t4, n, direction):
                # reversed run: the node before t5 is its old successor
                t6 = along(tour, pos, t5, n, direction)
            else:
                t6 = along(tour, pos, t5, n, 1 - direction)
            if t6 == t4 or (t6 == t3 and t5 == t2):
                continue  # no flip, or (t2, t3) would go again
            c5[n1] = t5
            c6[n1] = t6
            c56 = lk_w(w, nb, st, t5, t6)
            d45[n1] = c45
            d56[n1] = c56
            s1[n1] = c56 - c45
            evals[0] += 1
            cl = g3 + c56 - w[t1, t6]
            if cl > best_close:
                best_close = cl
                close_pick = n1
            n1 += 1
        if best_close > st.eps:  # the best sequential 3-opt move closing here
            lk_two_flips(tour, pos, st, t2, t3, t4, c5[close_pick], c6[close_pick])
            return best_close
        if LK_MAX_DEPTH <= 2:
            continue
        for _b2 in range(LK_BREADTH_2):
            pick = lk_next(s1, n1, c5, c6, &t5, &t6, evals)
            if pick < 0:
                break
            g3 = g2 - d45[pick] + d56[pick]
            mark = st.ni
            lk_two_flips(tour, pos, st, t2, t3, t4, t5, t6)
            r = lk_step(w, tour, pos, nb, st, t6, g3, 2, evals)
            if r > 0.0:
                return r
            lk_pop(tour, pos, st, mark)
            st.nt = 0
    return 0.0


cdef inline double lk_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                           const long long[:, ::1] nb, const double *nbw, long long n,
                           long long a, long long *evals, long long *queue, unsigned char *inq,
                           long long *tail, Log *log, double eps) noexcept nogil:
    """A Lin-Kernighan move (depth up to LK_MAX_DEPTH flips) that drops a link at ``a``."""
    cdef LKState st
    cdef long long t2, m
    cdef int k
    cdef double r
    if n < 8:
        return 0.0
    st.t1 = a
    st.n = n
    st.array_flip = n // LK_ARRAY_FRACTION
    if st.array_flip < LK_ARRAY_FLIP:
        st.array_flip = LK_ARRAY_FLIP
    st.eps = eps
    st.nbw = nbw
    st.K = nb.shape[1]
    for k in range(2):
        t2 = along(tour, pos, a, n, k)
        st.ni = 0
        st.nphys = 0
        st.nt = 0
        r = lk_first_levels(w, tour, pos, nb, &st, t2, evals)
        if r > 0.0:
            for m in range(st.nphys, st.ni):
                reverse_path(tour, pos, st.fi[m], st.fj[m], n)
            if log.enabled:
                for m in range(st.ni):
                    log_reversal(log, st.fi[m], st.fj[m])
            push(queue, inq, tail, n, a)
            push(queue, inq, tail, n, t2)
            for m in range(st.nt):
                push(queue, inq, tail, n, st.touched[m])
            return -r
    return 0.0
