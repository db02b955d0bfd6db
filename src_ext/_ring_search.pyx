# Ring (TSP) search kernels: candidate lists (nearest and alpha-nearest),
# nearest-neighbour and greedy-edge construction, local search (2-opt, Or-opt,
# Lin-Kernighan, or-3opt) with don't-look bits, and iterated local search.
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
from libc.math cimport INFINITY, NAN
from libc.stdlib cimport malloc, free

from _ring_common cimport (
    now_s, rng_int, cyc, succ, pred, delta_two_opt, delta_or_opt, tolerance,
    Log, flip, move_segment, undo_log, reverse_path, log_reversal,
)

import numpy as np

# stop codes returned to Python
cdef enum:
    STOP_LOCAL_OPTIMUM = 0
    STOP_TIME_LIMIT = 1
    STOP_MAX_ITER = 2


def knn_lists(const floating[:, ::1] w, int k):
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


def nearest_neighbor(const floating[:, ::1] w, long long start):
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
            best = INFINITY
            nxt = -1
            for j in range(n):
                if not used[j] and (nxt < 0 or w[cur, j] < best):
                    best = w[cur, j]
                    nxt = j
            tour[k] = nxt
            used[nxt] = 1
            cur = nxt
    return tour_np


cdef double prim(const floating[:, ::1] w, const double *pi, long long n, long long *par,
                 long long *order, double *key, unsigned char *intree,
                 long long *deg) noexcept nogil:
    """Minimum spanning tree of w[i, j] + pi[i] + pi[j] (dense Prim, O(n^2)).

    Fills the parent of each vertex, the order vertices joined the tree
    (parents first) and the degrees; returns the weight of the tree plus the
    cheapest second link of a leaf, a 1-tree.
    """
    cdef long long i, j, k, best_j
    cdef double best, c, total = 0.0, extra
    for i in range(n):
        intree[i] = 0
        deg[i] = 0
        key[i] = w[0, i] + pi[0] + pi[i]
        par[i] = 0
    intree[0] = 1
    order[0] = 0
    par[0] = -1
    for k in range(1, n):
        best = INFINITY
        best_j = -1
        for j in range(n):
            if not intree[j] and (best_j < 0 or key[j] < best):
                best = key[j]
                best_j = j
        j = best_j
        intree[j] = 1
        order[k] = j
        total += best
        deg[j] += 1
        deg[par[j]] += 1
        for i in range(n):
            if not intree[i]:
                c = w[j, i] + pi[j] + pi[i]
                if c < key[i]:
                    key[i] = c
                    par[i] = j
    # close a 1-tree at the leaf whose second-cheapest link is cheapest
    extra = INFINITY
    best_j = -1
    k = -1
    for i in range(n):
        if deg[i] != 1:
            continue
        for j in range(n):
            if j == i or j == par[i]:
                continue
            c = w[i, j] + pi[i] + pi[j]
            if k < 0 or c < extra:
                extra = c
                best_j = j
                k = i
    if k >= 0:
        deg[k] += 1
        deg[best_j] += 1
        total += extra
    return total


def alpha_candidates(const floating[:, ::1] w, int k, int iterations=50):
    """The k alpha-nearest processes of each process, sorted by weight.

    Alpha-nearness (Helsgaun, LKH): alpha(i, j) is how much the minimum
    1-tree grows when it must contain the link (i, j), on weights
    w[i, j] + pi[i] + pi[j] whose node penalties pi come from ``iterations``
    steps of subgradient ascent on the 1-tree bound (Held-Karp). Links with
    small alpha are the likely links of a short ring: between two groups of
    close processes they include the cheapest bridges, which plain nearest
    neighbours miss once a group is larger than k. O(iterations * n^2).
    Returns (candidates, pi, the largest 1-tree value seen, an estimate of
    the Held-Karp bound).
    """
    cdef Py_ssize_t n = w.shape[0]
    cdef long long i, j, t, _it, u, cnt
    cdef double step, bound, best_bound = -INFINITY, c, mean_w = 0.0
    if k > n - 1:
        k = n - 1
    out_np = np.empty((n, k), dtype=np.int64)
    cdef long long[:, ::1] out = out_np
    pi_np = np.zeros(n, dtype=np.float64)
    cdef double[::1] pi_best = pi_np
    cdef double[::1] pi = np.zeros(n, dtype=np.float64)
    cdef double[::1] prev_v = np.zeros(n, dtype=np.float64)
    cdef double[::1] key = np.empty(n, dtype=np.float64)
    cdef double[::1] beta = np.empty(n, dtype=np.float64)
    cdef double[::1] best = np.empty(k + 1, dtype=np.float64)
    cdef double[::1] bw = np.empty(k + 1, dtype=np.float64)
    cdef long long[::1] par = np.empty(n, dtype=np.int64)
    cdef long long[::1] order = np.empty(n, dtype=np.int64)
    cdef long long[::1] deg = np.empty(n, dtype=np.int64)
    cdef unsigned char[::1] intree = np.empty(n, dtype=np.uint8)
    cdef unsigned char[::1] onpath = np.empty(n, dtype=np.uint8)
    with nogil:
        for i in range(n):
            pi[i] = 0.0
            prev_v[i] = 0.0
            for j in range(n):
                mean_w += w[i, j]
        mean_w /= <double>(n * n)
        step = 0.01 * mean_w
        for _it in range(iterations):
            bound = prim(w, &pi[0], n, &par[0], &order[0], &key[0], &intree[0], &deg[0])
            for i in range(n):
                bound -= 2.0 * pi[i]
            if bound > best_bound:
                best_bound = bound
                for i in range(n):
                    pi_best[i] = pi[i]
            cnt = 0
            for i in range(n):
                if deg[i] != 2:
                    cnt += 1
            if cnt == 0:
                break
            for i in range(n):
                pi[i] += step * (0.7 * (deg[i] - 2) + 0.3 * prev_v[i])
                prev_v[i] = deg[i] - 2
            step *= 0.95
        for i in range(n):
            pi[i] = pi_best[i]
        prim(w, &pi[0], n, &par[0], &order[0], &key[0], &intree[0], &deg[0])
        for i in range(n):
            # beta[j]: heaviest tree link on the path i .. j
            for j in range(n):
                onpath[j] = 0
            beta[i] = -INFINITY
            onpath[i] = 1
            u = i
            while par[u] >= 0:
                c = w[u, par[u]] + pi[u] + pi[par[u]]
                beta[par[u]] = beta[u] if beta[u] > c else c
                onpath[par[u]] = 1
                u = par[u]
            for t in range(n):
                j = order[t]
                if onpath[j]:
                    continue
                c = w[j, par[j]] + pi[j] + pi[par[j]]
                beta[j] = beta[par[j]] if beta[par[j]] > c else c
            # k smallest alpha, ties by weight
            cnt = 0
            for j in range(n):
                if j == i:
                    continue
                c = w[i, j] + pi[i] + pi[j] - beta[j]
                if c < 0.0:
                    c = 0.0
                if cnt == k and (c > best[k - 1] or (c == best[k - 1] and w[i, j] >= bw[k - 1])):
                    continue
                t = cnt if cnt < k else k - 1
                while t > 0 and (best[t - 1] > c or (best[t - 1] == c and bw[t - 1] > w[i, j])):
                    best[t] = best[t - 1]
                    bw[t] = bw[t - 1]
                    out[i, t] = out[i, t - 1]
                    t -= 1
                best[t] = c
                bw[t] = w[i, j]
                out[i, t] = j
                if cnt < k:
                    cnt += 1
            # the search reads candidates nearest first
            for t in range(1, k):
                u = out[i, t]
                c = w[i, u]
                j = t
                while j > 0 and w[i, out[i, j - 1]] > c:
                    out[i, j] = out[i, j - 1]
                    j -= 1
                out[i, j] = u
    return out_np, pi_np, best_bound


cdef long long find_root(long long *parent, long long x) noexcept nogil:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def greedy_edge(const floating[:, ::1] w, const long long[::1] src, const long long[::1] dst):
    """Greedy-edge tour: take candidate links (src[k], dst[k]) shortest first.

    The links must come sorted by weight. A link is kept when both ends have
    fewer than two links and it closes no cycle; the fragments left are then
    chained, each time to the fragment end nearest to the current end.
    """
    cdef Py_ssize_t n = w.shape[0], m = src.shape[0]
    cdef Py_ssize_t k, t
    cdef long long a, b, ra, rb, cur, prev, nxt_node, best_end, kept = 0
    cdef double best
    tour_np = np.empty(n, dtype=np.int64)
    cdef long long[::1] tour = tour_np
    cdef long long[:, ::1] adj = np.full((n, 2), -1, dtype=np.int64)
    cdef long long[::1] parent = np.arange(n, dtype=np.int64)
    cdef unsigned char[::1] deg = np.zeros(n, dtype=np.uint8)
    cdef unsigned char[::1] used = np.zeros(n, dtype=np.uint8)
    with nogil:
        for k in range(m):
            a = src[k]
            b = dst[k]
            if a == b or deg[a] >= 2 or deg[b] >= 2:
                continue
            ra = find_root(&parent[0], a)
            rb = find_root(&parent[0], b)
            if ra == rb:
                continue
            parent[ra] = rb
            adj[a, deg[a]] = b
            adj[b, deg[b]] = a
            deg[a] += 1
            deg[b] += 1
            kept += 1
            if kept == n - 1:
                break
        # walk the fragments, starting from an end of one of them
        cur = 0
        for k in range(n):
            if deg[k] < 2:
                cur = k
                break
        t = 0
        while True:
            # walk the fragment that starts at cur
            prev = -1
            while True:
                tour[t] = cur
                used[cur] = 1
                t += 1
                nxt_node = adj[cur, 0] if adj[cur, 0] != prev else adj[cur, 1]
                if nxt_node < 0 or used[nxt_node]:
                    break
                prev = cur
                cur = nxt_node
            if t == n:
                break
            # nearest end of a fragment not yet visited
            best = INFINITY
            best_end = -1
            for k in range(n):
                if not used[k] and deg[k] < 2 and (best_end < 0 or w[cur, k] < best):
                    best = w[cur, k]
                    best_end = k
            cur = best_end
    return tour_np


cdef inline void push(long long *queue, unsigned char *inq, long long *tail,
                      long long n, long long c) noexcept nogil:
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


cdef double sequential_3opt(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                            const long long[:, ::1] nb, long long n, long long a,
                            long long *evals, long long *queue, unsigned char *inq,
                            long long *tail, Log *log, double eps) noexcept nogil:
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
            if gain1 <= eps:
                break
            d = succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)
            if c == b or d == a:
                continue
            gain1 += w[c, d]
            for ke in range(K):
                e = nb[b, ke]
                gain2 = gain1 - w[b, e]
                if gain2 <= eps:
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
                if total > eps:
                    flip(tour, pos, n, a, b, c, d, log)
                    flip(tour, pos, n, b, d, e, f, log)
                    push6(queue, inq, tail, n, a, b, c, d, e, f)
                    return -total
    return 0.0


cdef double segment_exchange(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                             const long long[:, ::1] nb, long long n, long long a,
                             long long *evals, long long *queue, unsigned char *inq,
                             long long *tail, Log *log, double eps) noexcept nogil:
    """Pure 3-opt segment exchange (no reversal) around ``a``; the or-3opt move.

    Walking the tour in ``direction`` it reads a b ... e f ... c d and
    exchanges the runs b..e and f..c: a f ... c b ... e d. The edges (a,b),
    (c,d), (e,f) are replaced by (b,c), (d,e), (f,a), with c a neighbour of b
    and e a neighbour of d. Returns the (negative) delta or 0.
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
            c = nb[b, kk]
            gain1 = w[a, b] - w[b, c]
            if gain1 <= eps:
                break
            if c == a:
                continue
            d = succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)
            if d == a or d == b:
                continue
            gain1 += w[c, d]
            for ke in range(K):
                e = nb[d, ke]
                gain2 = gain1 - w[d, e]
                if gain2 <= eps:
                    break
                if e == c or not in_run(pos, e, b, c, n, direction):
                    continue
                f = succ(tour, pos, e, n) if direction == 0 else pred(tour, pos, e, n)
                evals[0] += 1
                total = gain2 + w[e, f] - w[f, a]
                if total > eps:
                    if direction == 0:
                        move_segment(tour, pos, n, b, e, c, d, False, log)
                    else:
                        move_segment(tour, pos, n, e, b, d, c, False, log)
                    push6(queue, inq, tail, n, a, b, c, d, e, f)
                    return -total
    return 0.0


# Lin-Kernighan move: at most LK_MAX_DEPTH flips; level 0 tries 5 first links,
# level 1 closes at the best of all its candidates or descends from the 2 most
# promising, deeper levels from 1
cdef int LK_MAX_DEPTH = 5
cdef int LK_BREADTH_1 = 5
cdef int LK_BREADTH_2 = 2


cdef struct LKState:
    long long t1
    long long n
    long long ni            # flips applied (entries in fi / fj)
    long long fi[16]
    long long fj[16]
    long long added_a[16]   # links added so far (t2, t3)
    long long added_b[16]
    long long touched[64]
    long long nt
    double eps              # smallest gain that counts


cdef inline void lk_flip(long long[::1] tour, long long[::1] pos, LKState *st, long long a,
                         long long b, long long c, long long d) noexcept nogil:
    """flip() that records the reversal in the move's own log."""
    cdef long long n = st.n, i, j
    if succ(tour, pos, a, n) == b:
        i = pos[b]
        j = pos[c]
    else:
        i = pos[a]
        j = pos[d]
    reverse_path(tour, pos, i, j, n)
    st.fi[st.ni] = i
    st.fj[st.ni] = j
    st.ni += 1


cdef inline bint lk_added(LKState *st, long long level, long long x, long long y) noexcept nogil:
    cdef long long k
    for k in range(level):
        if ((st.added_a[k] == x and st.added_b[k] == y)
                or (st.added_a[k] == y and st.added_b[k] == x)):
            return True
    return False


cdef long long lk_candidates(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                             const long long[:, ::1] nb, LKState *st, long long t2,
                             double gain, long long level, long long *c3, long long *c4,
                             double *score) noexcept nogil:
    """Candidates (t3, t4) for dropping (t1, t2): positive partial gain, not tabu.

    t4 is the neighbour of t3 on the side that keeps the ring valid after the
    flip; the score is the lookahead w(t3, t4) - w(t2, t3). Returns how many.
    """
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long n = st.n, t1 = st.t1, t3, t4, m = 0
    cdef bint fwd_order = succ(tour, pos, t1, n) == t2
    for kk in range(K):
        if m == 16:
            break
        t3 = nb[t2, kk]
        if gain - w[t2, t3] <= st.eps:
            break
        if t3 == t1 or t3 == t2:
            continue
        t4 = pred(tour, pos, t3, n) if fwd_order else succ(tour, pos, t3, n)
        if t4 == t2 or lk_added(st, level, t3, t4):
            continue
        c3[m] = t3
        c4[m] = t4
        score[m] = w[t3, t4] - w[t2, t3]
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


cdef double lk_step(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                    const long long[:, ::1] nb, LKState *st, long long t2, double gain,
                    long long level, long long *evals) noexcept nogil:
    """One level of a Lin-Kernighan move built from 2-opt flips.

    The link (t1, t2) is to go (t2 next to t1 in the current tour); for a
    candidate t3 of t2 with positive partial gain, the flip that adds (t2, t3)
    and drops (t3, t4) leaves a valid ring with the closing link (t1, t4). The
    first ring shorter than at the start is kept (returns its gain); else the
    flips of this level are undone and 0 is returned. Breadth 5, 3, then 1.
    """
    cdef long long n = st.n, t1 = st.t1, t3, t4, mark, _b, pick
    cdef long long cand3[16]
    cdef long long cand4[16]
    cdef double score[16]
    cdef double g2, close, r
    cdef long long ncand = 0, breadth = (
        LK_BREADTH_1 if level == 0 else LK_BREADTH_2 if level == 1 else 1)
    ncand = lk_candidates(w, tour, pos, nb, st, t2, gain, level, cand3, cand4, score)
    for _b in range(breadth):
        # the best remaining candidate by the lookahead rule
        pick = take_best(score, ncand)
        if pick < 0:
            return 0.0
        t3 = cand3[pick]
        t4 = cand4[pick]
        evals[0] += 1
        mark = st.ni
        lk_flip(tour, pos, st, t1, t2, t4, t3)
        st.added_a[level] = t2
        st.added_b[level] = t3
        g2 = gain - w[t2, t3] + w[t3, t4]
        close = g2 - w[t4, t1]
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
        while st.ni > mark:
            st.ni -= 1
            reverse_path(tour, pos, st.fi[st.ni], st.fj[st.ni], n)
        st.nt -= 3 if st.nt >= 3 else 0
    return 0.0


cdef void lk_two_flips(long long[::1] tour, long long[::1] pos, LKState *st, long long t2,
                       long long t3, long long t4, long long t5, long long t6) noexcept nogil:
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


cdef double lk_first_levels(const floating[:, ::1] w, long long[::1] tour,
                            long long[::1] pos, const long long[:, ::1] nb, LKState *st,
                            long long t2, long long *evals) noexcept nogil:
    """Levels 0 and 1 of the Lin-Kernighan move, scored without moving anything.

    In the orientation with t2 after t1 the ring reads t1 t2 .. t4 t3 .. ;
    the first flip would give t1 t4 .. t2 t3 .. (the run t2..t4 reversed), so
    the node before any t5 in that ring is read off the current positions.
    Only a move that gains, or the descent to level 2, touches the tour.
    """
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long n = st.n, t1 = st.t1, t3, t4, t5, t6, pick, _b1, _b2, mark
    cdef int direction = 0 if succ(tour, pos, t1, n) == t2 else 1
    cdef long long c3[16]
    cdef long long c4[16]
    cdef double s0[16]
    cdef long long c5[16]
    cdef long long c6[16]
    cdef double s1[16]
    cdef double gain = w[t1, t2], g2, g3, best_close, r
    cdef long long n0 = 0, n1, close_pick
    n0 = lk_candidates(w, tour, pos, nb, st, t2, gain, 0, c3, c4, s0)
    for _b1 in range(LK_BREADTH_1):
        pick = take_best(s0, n0)
        if pick < 0:
            return 0.0
        t3 = c3[pick]
        t4 = c4[pick]
        evals[0] += 1
        g2 = gain - w[t2, t3] + w[t3, t4]
        if g2 - w[t4, t1] > st.eps:  # a 2-opt move
            lk_flip(tour, pos, st, t1, t2, t4, t3)
            st.touched[0] = t3
            st.touched[1] = t4
            st.nt = 2
            return g2 - w[t4, t1]
        # level 1 from t4, in the ring after the first flip
        n1 = 0
        best_close = 0.0
        close_pick = -1
        for kk in range(K):
            if n1 == 16:
                break
            t5 = nb[t4, kk]
            g3 = g2 - w[t4, t5]
            if g3 <= st.eps:
                break
            if t5 == t1 or t5 == t4 or t5 == t3:
                continue
            if in_run(pos, t5, t2, t4, n, direction):
                # reversed run: the node before t5 is its old successor
                t6 = succ(tour, pos, t5, n) if direction == 0 else pred(tour, pos, t5, n)
            else:
                t6 = pred(tour, pos, t5, n) if direction == 0 else succ(tour, pos, t5, n)
            if t6 == t4 or (t6 == t3 and t5 == t2):
                continue  # no flip, or (t2, t3) would go again
            c5[n1] = t5
            c6[n1] = t6
            s1[n1] = w[t5, t6] - w[t4, t5]
            evals[0] += 1
            if g3 + w[t5, t6] - w[t6, t1] > best_close:
                best_close = g3 + w[t5, t6] - w[t6, t1]
                close_pick = n1
            n1 += 1
        if best_close > st.eps:  # the best sequential 3-opt move closing here
            lk_two_flips(tour, pos, st, t2, t3, t4, c5[close_pick], c6[close_pick])
            return best_close
        if LK_MAX_DEPTH <= 2:
            continue
        for _b2 in range(LK_BREADTH_2):
            pick = take_best(s1, n1)
            if pick < 0:
                break
            t5 = c5[pick]
            t6 = c6[pick]
            evals[0] += 1
            g3 = g2 - w[t4, t5] + w[t5, t6]
            mark = st.ni
            lk_two_flips(tour, pos, st, t2, t3, t4, t5, t6)
            r = lk_step(w, tour, pos, nb, st, t6, g3, 2, evals)
            if r > 0.0:
                return r
            while st.ni > mark:
                st.ni -= 1
                reverse_path(tour, pos, st.fi[st.ni], st.fj[st.ni], n)
            st.nt = 0
    return 0.0


cdef double lk_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                    const long long[:, ::1] nb, long long n, long long a, long long *evals,
                    long long *queue, unsigned char *inq, long long *tail,
                    Log *log, double eps) noexcept nogil:
    """A Lin-Kernighan move (depth up to LK_MAX_DEPTH flips) that drops a link at ``a``."""
    cdef LKState st
    cdef long long t2, k, m
    cdef double r
    if n < 8:
        return 0.0
    st.t1 = a
    st.n = n
    st.eps = eps
    for k in range(2):
        t2 = succ(tour, pos, a, n) if k == 0 else pred(tour, pos, a, n)
        st.ni = 0
        st.nt = 0
        r = lk_first_levels(w, tour, pos, nb, &st, t2, evals)
        if r > 0.0:
            if log.enabled:
                for m in range(st.ni):
                    log_reversal(log, st.fi[m], st.fj[m])
            push(queue, inq, tail, n, a)
            push(queue, inq, tail, n, t2)
            for m in range(st.nt):
                push(queue, inq, tail, n, st.touched[m])
            return -r
    return 0.0


cdef double improve_city(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                         const long long[:, ::1] nb, long long n, long long a,
                         bint use_or, long long *evals, long long *queue,
                         unsigned char *inq, long long *tail, Log *log,
                         double eps) noexcept nogil:
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
            if w[a, c] >= dab - eps:
                break
            d = succ(tour, pos, c, n) if direction == 0 else pred(tour, pos, c, n)
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
    # the two sequential 3-opt families: new link at a (t4 on the far side
    # of t3), then the Lin-Kernighan chain from the link that leaves a
    delta = sequential_3opt(w, tour, pos, nb, n, a, evals, queue, inq, tail, log, eps)
    if delta != 0.0:
        return delta
    delta = lk_move(w, tour, pos, nb, n, a, evals, queue, inq, tail, log, eps)
    if delta != 0.0:
        return delta
    return segment_exchange(w, tour, pos, nb, n, a, evals, queue, inq, tail, log, eps)


cdef double run_queue(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                      const long long[:, ::1] nb, long long n, bint use_or,
                      long long *evals, long long *moves, long long *queue,
                      unsigned char *inq, long long *head, long long *tail,
                      double deadline, long long max_moves, int *stop, Log *log,
                      double eps) noexcept nogil:
    """Pop cities until the queue is empty; returns the total delta."""
    cdef double total = 0.0, delta
    cdef long long a
    while head[0] < tail[0]:
        a = queue[head[0] % n]
        head[0] += 1
        inq[a] = 0
        while True:
            delta = improve_city(w, tour, pos, nb, n, a, use_or, evals, queue, inq, tail, log,
                                 eps)
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


def local_search(const floating[:, ::1] w, long long[::1] tour, const long long[:, ::1] nb,
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
                          &head, &tail, deadline, max_moves, &stop, &log, tolerance(w))
    free(queue)
    free(inq)
    return total, evals, moves, stop


def iterated_local_search(const floating[:, ::1] w, long long[::1] tour,
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
    cdef double eps = tolerance(w)
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
                               &head, &tail, deadline, 0, &inner_stop, &log, eps)
            while head < tail:  # drain a queue left by a time-out
                inq[queue[head % n]] = 0
                head += 1
            if delta < -eps:
                total += delta
            elif delta > eps:
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
