# Header-only Lin-Kernighan move of the symmetric ring local search
# (_ring_search): a chain of at most LK3_MAX_STEPS sequential 3-opt steps (the
# basis move of LKH with MOVE_TYPE = 3) that drops a link at one process, each
# step adding two candidate links with positive partial gain, kept as soon as
# the closed ring is shorter. A step is scored without moving anything; the
# chain so far is made on a virtual tour.
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
from _ring_common cimport Log, log_reversal, pred, reverse_path, succ
from _ring_moves cimport along, push


cdef enum:
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
    long long fi[48]        # the reverse_path arguments of each flip
    long long fj[48]
    long long va[48]        # the interval it reverses: first position, length
    long long vl[48]
    long long added_a[48]   # links added so far: (t2, t3) and (t4, t5) of each step
    long long added_b[48]
    long long na            # entries of added_a / added_b
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


# The step (LKH's sequential 3-opt basis move, MOVE_TYPE = 3): for the link
# (t1, t2) that goes, every candidate t3 of t2 with either tour neighbour t4
# of t3, and every candidate t5 of t4 with each t6 that closes a valid ring:
# t4 before t3 (t2 after t1) is the 2-opt case, closing at (t1, t4) or going
# on with the one t6 that keeps the ring valid; t4 after t3 is the or-type
# case, whose first exchange alone would split the ring: t5 on the run
# t2 .. t3 and both its neighbours t6 (the exchange of the runs t2..t5 and
# t6..t3, or both reversed in place). The step closes at the first (t6, t1)
# that gains, else continues from t6 with the best partial gain G4 (no
# backtracking, as in LKH). It replaces chains of 2-opt flips (depth 10,
# breadth 3 / 2 / 1), whose steps chose t3 by a one-link lookahead and could
# not start with the or-type case: at about the same cost per kick, the ring
# on independent uniform weights is shorter after the same kicks, and the
# local optimum before the kicks far closer to LKH-3's
# (bench/bench_ring_kicks.py). The first step may go on from up to
# LK3_MAX_BREADTH of its best partial gains in turn (``breadth`` of lk_move),
# and the second step from up to as many (``breadth2``); deeper steps from the
# best only.
cdef enum:
    LK3_MAX_STEPS = 8
    LK3_MAX_BREADTH = 3  # first-step alternatives a chain may try
    LK3_SLOTS = 48       # flips a chain may hold (LKState.fi ...)


cdef inline bint v_between(long long[::1] pos, LKState *st, long long a, long long b,
                           long long c, bint fwd) noexcept nogil:
    """Whether ``b`` lies on the run from ``a`` to ``c`` walked forward (``fwd``) or back,
    in the virtual tour."""
    cdef long long pa = v_pos(pos, st, a), pb = v_pos(pos, st, b), pc = v_pos(pos, st, c)
    cdef long long n = st.n, x, y
    if fwd:
        x = pb - pa
        y = pc - pa
    else:
        x = pa - pb
        y = pa - pc
    if x < 0:
        x += n
    if y < 0:
        y += n
    return x <= y


cdef inline void lk3_apply(long long[::1] tour, long long[::1] pos, LKState *st, long long t2,
                           long long t3, long long t4, long long t5, long long t6,
                           int kind) noexcept nogil:
    """Make a 3-opt step on the virtual tour (t2 after t1 in the orientation read).

    kind 0: the 2-opt move (t1,t2),(t4,t3) -> (t2,t3),(t1,t4); 1: it and the
    2-opt from (t1, t4) to t5, t6; 2: t1 t2..t5 t6..t3 t4 -> t1 t6..t3 t2..t5 t4;
    3: t1 t2..t6 t5..t3 t4 -> t1 t6..t2 t3..t5 t4.
    """
    cdef long long t1 = st.t1
    if kind == 0 or kind == 1:
        lk_flip(tour, pos, st, t1, t2, t4, t3)
        if kind == 1:
            lk_flip(tour, pos, st, t1, t4, t6, t5)
    elif kind == 2:
        lk_flip(tour, pos, st, t1, t2, t5, t6)
        lk_flip(tour, pos, st, t1, t5, t3, t4)
        lk_flip(tour, pos, st, t1, t3, t6, t2)
    else:
        lk_flip(tour, pos, st, t1, t2, t6, t5)
        lk_flip(tour, pos, st, t2, t5, t3, t4)
    st.added_a[st.na] = t2
    st.added_b[st.na] = t3
    st.na += 1
    if kind != 0:
        st.added_a[st.na] = t4
        st.added_b[st.na] = t5
        st.na += 1
    if st.nt + 4 <= 64:
        st.touched[st.nt] = t3
        st.touched[st.nt + 1] = t4
        st.touched[st.nt + 2] = t5 if kind != 0 else t3
        st.touched[st.nt + 3] = t6 if kind != 0 else t4
        st.nt += 4


cdef inline double lk3_step(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                            const long long[:, ::1] nb, LKState *st, long long t2, double gain,
                            long long step, long long breadth, long long next_breadth,
                            long long *evals) noexcept nogil:
    """One 3-opt step of the Lin-Kernighan chain that drops (t1, t2) with partial gain
    ``gain``: returns the gain of the first shorter ring (its flips kept on the
    virtual tour), else 0 with the tour as on entry. It goes on from up to
    ``breadth`` partial gains, the next step from up to ``next_breadth``."""
    cdef Py_ssize_t k3, k5, K = nb.shape[1]
    cdef long long t1 = st.t1, t3, t4, t5, t6, nbest = 0, b, j, mark, nt0, na0
    cdef int x4, x6, kind
    cdef bint fwd = v_succ(tour, pos, st, t1) == t2, deeper
    cdef double g1, g2, g3, g4, close, r
    cdef long long bt3[4]
    cdef long long bt4[4]
    cdef long long bt5[4]
    cdef long long bt6[4]
    cdef int bkind[4]
    cdef double bg4[4]
    if breadth > LK3_MAX_BREADTH:
        breadth = LK3_MAX_BREADTH
    deeper = step + 1 < LK3_MAX_STEPS and st.ni + 6 <= LK3_SLOTS and st.na + 2 <= LK3_SLOTS
    for k3 in range(K):
        t3 = nb[t2, k3]
        g1 = gain - st.nbw[t2 * K + k3]
        if g1 <= st.eps:
            break
        if t3 == t1 or t3 == t2:
            continue
        if (v_succ(tour, pos, st, t2) if fwd else v_pred(tour, pos, st, t2)) == t3:
            continue  # (t2, t3) is a link already
        for x4 in range(1, 3):
            if (x4 == 1) == fwd:
                t4 = v_pred(tour, pos, st, t3)
            else:
                t4 = v_succ(tour, pos, st, t3)
            if t4 == t1 or t4 == t2 or lk_added(st, st.na, t3, t4):
                continue
            g2 = g1 + lk_w(w, nb, st, t3, t4)
            if x4 == 1:
                evals[0] += 1
                close = g2 - w[t1, t4]
                if close > st.eps:
                    lk3_apply(tour, pos, st, t2, t3, t4, t4, t4, 0)
                    return close
            for k5 in range(K):
                t5 = nb[t4, k5]
                g3 = g2 - st.nbw[t4 * K + k5]
                if g3 <= st.eps:
                    break
                if t5 == t1 or t5 == t3 or t5 == t4:
                    continue
                if x4 == 2 and not v_between(pos, st, t2, t5, t3, fwd):
                    continue
                for x6 in range(1, 3):
                    if x4 == 1:
                        if x6 == 2:
                            break
                        # after the first flip the run t2..t4 is reversed
                        if v_between(pos, st, t2, t5, t4, fwd) == fwd:
                            t6 = v_succ(tour, pos, st, t5)
                        else:
                            t6 = v_pred(tour, pos, st, t5)
                        if t6 == t4 or (t6 == t3 and t5 == t2):
                            continue
                        kind = 1
                    elif x6 == 1:
                        t6 = v_succ(tour, pos, st, t5) if fwd else v_pred(tour, pos, st, t5)
                        kind = 2
                    else:
                        if t5 == t2:
                            continue
                        t6 = v_pred(tour, pos, st, t5) if fwd else v_succ(tour, pos, st, t5)
                        kind = 3
                    if t6 == t1 or lk_added(st, st.na, t5, t6):
                        continue
                    g4 = g3 + lk_w(w, nb, st, t5, t6)
                    evals[0] += 1
                    close = g4 - w[t1, t6]
                    if close > st.eps:
                        lk3_apply(tour, pos, st, t2, t3, t4, t5, t6, kind)
                        return close
                    if not deeper or g4 <= st.eps:
                        continue
                    # keep the ``breadth`` best by G4
                    j = nbest if nbest < breadth else breadth - 1
                    if nbest == breadth and g4 <= bg4[j]:
                        continue
                    while j > 0 and bg4[j - 1] < g4:
                        bt3[j] = bt3[j - 1]
                        bt4[j] = bt4[j - 1]
                        bt5[j] = bt5[j - 1]
                        bt6[j] = bt6[j - 1]
                        bkind[j] = bkind[j - 1]
                        bg4[j] = bg4[j - 1]
                        j -= 1
                    bt3[j] = t3
                    bt4[j] = t4
                    bt5[j] = t5
                    bt6[j] = t6
                    bkind[j] = kind
                    bg4[j] = g4
                    if nbest < breadth:
                        nbest += 1
    for b in range(nbest):
        mark = st.ni
        nt0 = st.nt
        na0 = st.na
        lk3_apply(tour, pos, st, t2, bt3[b], bt4[b], bt5[b], bt6[b], bkind[b])
        r = lk3_step(w, tour, pos, nb, st, bt6[b], bg4[b], step + 1, next_breadth, 1, evals)
        if r > 0.0:
            return r
        lk_pop(tour, pos, st, mark)
        st.nt = nt0
        st.na = na0
    return 0.0


cdef inline double lk_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                           const long long[:, ::1] nb, const double *nbw, long long n,
                           long long a, long long *evals, long long *queue, unsigned char *inq,
                           long long *tail, Log *log, double eps,
                           long long breadth, long long breadth2) noexcept nogil:
    """A Lin-Kernighan move (up to LK3_MAX_STEPS 3-opt steps) that drops a link at ``a``;
    its first step goes on from up to ``breadth`` (1 .. LK3_MAX_BREADTH) partial gains,
    its second from up to ``breadth2``."""
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
        st.na = 0
        r = lk3_step(w, tour, pos, nb, &st, t2, lk_w(w, nb, &st, a, t2), 0, breadth, breadth2,
                     evals)
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
