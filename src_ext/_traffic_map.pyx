# Compiled kernels of the ``map`` method (rankopt/solvers/mapping.py): process
# mapping of a job's point-to-point traffic onto a hierarchical network.
#
#   bisect        split a set of ranks into two parts of exact sizes with a
#                 small cut of the (symmetric) traffic graph: greedy graph
#                 growing from a pseudo-peripheral seed, then Fiduccia-
#                 Mattheyses passes whose moves alternate between the sides
#                 (every pair of moves is a swap, so balance stays exact)
#   refine_time   first-improvement-by-rank swap descent on the α-β time of
#                 the traffic (sum over pairs of messages * latency + bytes /
#                 bandwidth), O(degree) per swap, with don't-look bits and
#                 candidate partners near the rank's traffic neighbours
#   greedy_place  a constructive start: ranks placed one by one, the most
#                 connected to those placed first, each on the free process
#                 where its traffic to them costs least
#   time_cost     the objective of refine_time for an order
#
# Conventions: ``order[k]`` is the process rank ``k`` runs on; the traffic of
# rank ``k`` to rank ``l`` is priced between processes ``order[k]`` and
# ``order[l]``. Graphs are CSR arrays of int64 with float64 weights, without
# self loops. Kernels trust their inputs (mapping.py validates).

from libc.stdlib cimport malloc, free


from _ring_common cimport now_s, rng_int  # the kernels' clock and splitmix64 stream


# ---------------------------------------------------------------- indexed max-heap
cdef struct Heap:
    long long *item   # heap of items
    long long *pos    # position of each item in the heap, -1 when absent
    double *key       # key of each item
    long long size


cdef inline bint _above(Heap *h, long long a, long long b) noexcept nogil:
    # item a sits above item b: larger key, ties to the smaller item (deterministic)
    return h.key[a] > h.key[b] or (h.key[a] == h.key[b] and a < b)


cdef inline void _sift_up(Heap *h, long long i) noexcept nogil:
    cdef long long x = h.item[i], p
    while i > 0:
        p = (i - 1) >> 1
        if not _above(h, x, h.item[p]):
            break
        h.item[i] = h.item[p]
        h.pos[h.item[i]] = i
        i = p
    h.item[i] = x
    h.pos[x] = i


cdef inline void _sift_down(Heap *h, long long i) noexcept nogil:
    cdef long long x = h.item[i], c
    while True:
        c = 2 * i + 1
        if c >= h.size:
            break
        if c + 1 < h.size and _above(h, h.item[c + 1], h.item[c]):
            c += 1
        if not _above(h, h.item[c], x):
            break
        h.item[i] = h.item[c]
        h.pos[h.item[i]] = i
        i = c
    h.item[i] = x
    h.pos[x] = i


cdef inline void heap_push(Heap *h, long long x, double k) noexcept nogil:
    h.key[x] = k
    h.item[h.size] = x
    h.pos[x] = h.size
    h.size += 1
    _sift_up(h, h.size - 1)


cdef inline void heap_remove(Heap *h, long long x) noexcept nogil:
    cdef long long i = h.pos[x], y
    if i < 0:
        return
    h.pos[x] = -1
    h.size -= 1
    if i == h.size:
        return
    y = h.item[h.size]
    h.item[i] = y
    h.pos[y] = i
    _sift_up(h, i)
    _sift_down(h, h.pos[y])


cdef inline void heap_add(Heap *h, long long x, double dk) noexcept nogil:
    """Change the key of ``x`` (in the heap) by ``dk``."""
    h.key[x] += dk
    if dk > 0:
        _sift_up(h, h.pos[x])
    else:
        _sift_down(h, h.pos[x])


# ---------------------------------------------------------------- bisection
cdef struct Sub:
    long long m
    long long *ptr
    long long *adj
    double *w


cdef double _cut(Sub *g, const signed char *side) noexcept nogil:
    cdef long long v, e
    cdef double c = 0.0
    for v in range(g.m):
        for e in range(g.ptr[v], g.ptr[v + 1]):
            if side[g.adj[e]] != side[v]:
                c += g.w[e]
    return 0.5 * c


cdef long long _bfs_last(Sub *g, long long s, long long *queue, signed char *seen) noexcept nogil:
    """The last vertex a BFS from ``s`` reaches (within ``s``'s component)."""
    cdef long long head = 0, tail = 1, v, e, u
    for v in range(g.m):
        seen[v] = 0
    queue[0] = s
    seen[s] = 1
    while head < tail:
        v = queue[head]
        head += 1
        for e in range(g.ptr[v], g.ptr[v + 1]):
            u = g.adj[e]
            if not seen[u]:
                seen[u] = 1
                queue[tail] = u
                tail += 1
    return queue[tail - 1]


cdef void _grow(Sub *g, long long size_a, long long seed_v, unsigned long long *rs,
                signed char *side, Heap *h, long long *order_buf) noexcept nogil:
    """Side 0 grown from ``seed_v`` to ``size_a`` vertices, each step the vertex
    whose move lowers the cut most (its weight to side 0 minus to side 1)."""
    cdef long long m = g.m, v, e, u, count = 0, k, nfree
    for v in range(m):
        side[v] = 1
        h.pos[v] = -1
    h.size = 0
    # a random order of the vertices, for restarts in other components
    for v in range(m):
        order_buf[v] = v
    for v in range(m - 1, 0, -1):
        k = rng_int(rs, v + 1)
        u = order_buf[v]
        order_buf[v] = order_buf[k]
        order_buf[k] = u
    nfree = 0
    v = seed_v
    while count < size_a:
        if h.size == 0:
            if count > 0:
                while side[order_buf[nfree]] == 0:
                    nfree += 1
                v = order_buf[nfree]
        else:
            v = h.item[0]
            heap_remove(h, v)
        side[v] = 0
        count += 1
        for e in range(g.ptr[v], g.ptr[v + 1]):
            u = g.adj[e]
            if side[u] == 0:
                continue
            if h.pos[u] < 0:
                # first contact: gain = w(u, side 0) - w(u, side 1)
                heap_push(h, u, 0.0)
                h.key[u] = 0.0
                _gain_init(g, u, side, h)
            else:
                heap_add(h, u, 2.0 * g.w[e])


cdef inline void _gain_init(Sub *g, long long u, const signed char *side, Heap *h) noexcept nogil:
    cdef long long e
    cdef double k = 0.0
    for e in range(g.ptr[u], g.ptr[u + 1]):
        if side[g.adj[e]] == 0:
            k += g.w[e]
        else:
            k -= g.w[e]
    heap_add(h, u, k - h.key[u])


cdef double _fm(Sub *g, signed char *side, int passes, double tol, Heap *h0, Heap *h1,
                double *gain, signed char *locked, long long *moved) noexcept nogil:
    """Fiduccia-Mattheyses passes with exact balance; returns the cut gained."""
    cdef long long m = g.m, v, e, u, nm, best_nm, since, limit
    cdef int _pass, s, _half
    cdef double cum, best, total = 0.0, wsum
    cdef Heap *hs
    cdef Heap *ho
    limit = 50 + m // 8
    for _pass in range(passes):
        h0.size = 0
        h1.size = 0
        for v in range(m):
            wsum = 0.0
            for e in range(g.ptr[v], g.ptr[v + 1]):
                if side[g.adj[e]] != side[v]:
                    wsum += g.w[e]
                else:
                    wsum -= g.w[e]
            gain[v] = wsum
            locked[v] = 0
            h0.pos[v] = -1
        for v in range(m):
            if side[v] == 0:
                heap_push(h0, v, gain[v])
            else:
                heap_push(h1, v, gain[v])
        cum = 0.0
        best = 0.0
        nm = 0
        best_nm = 0
        since = 0
        while h0.size > 0 and h1.size > 0:
            # a pair of moves: the better top first, then the other side's top
            if h0.key[h0.item[0]] >= h1.key[h1.item[0]]:
                s = 0
            else:
                s = 1
            for _half in range(2):
                hs = h0 if s == 0 else h1
                if hs.size == 0:
                    break
                v = hs.item[0]
                cum += hs.key[v]
                heap_remove(hs, v)
                locked[v] = 1
                side[v] = 1 - s
                moved[nm] = v
                nm += 1
                for e in range(g.ptr[v], g.ptr[v + 1]):
                    u = g.adj[e]
                    if locked[u]:
                        continue
                    ho = h0 if side[u] == 0 else h1
                    if side[u] == s:
                        heap_add(ho, u, 2.0 * g.w[e])
                    else:
                        heap_add(ho, u, -2.0 * g.w[e])
                s = 1 - s
            if nm % 2:
                break  # one side ran out mid-pair: that move is undone below
            if cum > best + tol:
                best = cum
                best_nm = nm
                since = 0
            else:
                since += 1
                if since > limit:
                    break
        for v in range(nm - 1, best_nm - 1, -1):
            u = moved[v]
            side[u] = 1 - side[u]
        total += best
        if best <= tol:
            break
    return total


def bisect(const long long[::1] xadj, const long long[::1] adj, const double[::1] w,
           const long long[::1] members, long long size_a, unsigned long long seed,
           int tries, int passes, long long[::1] loc):
    """Split ``members`` into sides 0 (``size_a`` vertices) and 1 with a small cut.

    ``loc`` is scratch of length n, all -1, left all -1. Returns
    ``(side, cut)``: ``side[t]`` the side of ``members[t]`` (int8).
    """
    import numpy as np

    cdef long long m = members.shape[0], v, e, u, ne = 0, t, s0
    cdef int _try
    cdef double cut, best_cut = -1.0, tol, wtot = 0.0
    cdef unsigned long long rs = seed
    side_out = np.zeros(m, dtype=np.int8)
    cdef signed char[::1] sout = side_out
    if size_a <= 0 or size_a >= m:
        for v in range(m):
            sout[v] = 0 if size_a >= m else 1
        return side_out, 0.0
    for t in range(m):
        loc[members[t]] = t
    for t in range(m):
        v = members[t]
        for e in range(xadj[v], xadj[v + 1]):
            if loc[adj[e]] >= 0:
                ne += 1
    cdef Sub g
    g.m = m
    g.ptr = <long long *>malloc((m + 1) * sizeof(long long))
    g.adj = <long long *>malloc((ne + 1) * sizeof(long long))
    g.w = <double *>malloc((ne + 1) * sizeof(double))
    cdef signed char *side = <signed char *>malloc(m * sizeof(signed char))
    cdef signed char *bside = <signed char *>malloc(m * sizeof(signed char))
    cdef signed char *flag = <signed char *>malloc(m * sizeof(signed char))
    cdef long long *buf = <long long *>malloc(2 * m * sizeof(long long))
    cdef long long *items = <long long *>malloc(2 * m * sizeof(long long))
    cdef long long *pos = <long long *>malloc(m * sizeof(long long))
    cdef double *key = <double *>malloc(m * sizeof(double))
    cdef double *gain = <double *>malloc(m * sizeof(double))
    cdef Heap h0, h1
    h0.item = items
    h1.item = items + m
    h0.pos = pos
    h1.pos = pos
    h0.key = key
    h1.key = key
    h0.size = h1.size = 0
    try:
        with nogil:
            ne = 0
            g.ptr[0] = 0
            for t in range(m):
                v = members[t]
                for e in range(xadj[v], xadj[v + 1]):
                    u = loc[adj[e]]
                    if u >= 0:
                        g.adj[ne] = u
                        g.w[ne] = w[e]
                        wtot += w[e]
                        ne += 1
                g.ptr[t + 1] = ne
            for t in range(m):
                loc[members[t]] = -1
            tol = 1e-12 * wtot
            for _try in range(tries):
                s0 = _bfs_last(&g, rng_int(&rs, m), buf, flag)
                _grow(&g, size_a, s0, &rs, side, &h0, buf)
                _fm(&g, side, passes, tol, &h0, &h1, gain, flag, buf)
                cut = _cut(&g, side)
                if best_cut < 0 or cut < best_cut - tol:
                    best_cut = cut
                    for v in range(m):
                        bside[v] = side[v]
                if best_cut <= 0:
                    break
            for v in range(m):
                sout[v] = bside[v]
    finally:
        free(g.ptr)
        free(g.adj)
        free(g.w)
        free(side)
        free(bside)
        free(flag)
        free(buf)
        free(items)
        free(pos)
        free(key)
        free(gain)
    return side_out, best_cut


# ---------------------------------------------------------------- the α-β time
cdef struct Net:
    const long long *out_ptr
    const long long *dst
    const long long *in_ptr
    const long long *in_src
    const long long *in_eid
    const double *msgs
    const double *nbytes
    const double *lat
    const double *bw
    bint has_bw
    long long n


cdef inline double _c(Net *t, long long e, long long a, long long b) noexcept nogil:
    cdef double x = t.msgs[e] * t.lat[a * t.n + b]
    if t.has_bw:
        x += t.nbytes[e] / t.bw[a * t.n + b]
    return x


cdef double _delta(Net *t, const long long *o, long long i, long long j) noexcept nogil:
    """Change of the time when ranks ``i`` and ``j`` swap processes."""
    cdef long long p = o[i], q = o[j], e, k, nk
    cdef double d = 0.0
    for e in range(t.out_ptr[i], t.out_ptr[i + 1]):
        k = t.dst[e]
        nk = p if k == j else o[k]
        d += _c(t, e, q, nk) - _c(t, e, p, o[k])
    for k in range(t.in_ptr[i], t.in_ptr[i + 1]):
        if t.in_src[k] == j:
            continue
        e = t.in_eid[k]
        d += _c(t, e, o[t.in_src[k]], q) - _c(t, e, o[t.in_src[k]], p)
    for e in range(t.out_ptr[j], t.out_ptr[j + 1]):
        k = t.dst[e]
        nk = q if k == i else o[k]
        d += _c(t, e, p, nk) - _c(t, e, q, o[k])
    for k in range(t.in_ptr[j], t.in_ptr[j + 1]):
        if t.in_src[k] == i:
            continue
        e = t.in_eid[k]
        d += _c(t, e, o[t.in_src[k]], p) - _c(t, e, o[t.in_src[k]], q)
    return d


cdef Net _net(const long long[::1] out_ptr, const long long[::1] dst,
              const long long[::1] in_ptr, const long long[::1] in_src,
              const long long[::1] in_eid, const double[::1] msgs, const double[::1] nbytes,
              const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw):
    cdef Net t
    t.n = lat.shape[0]
    t.out_ptr = &out_ptr[0]
    t.dst = &dst[0] if dst.shape[0] else NULL
    t.in_ptr = &in_ptr[0]
    t.in_src = &in_src[0] if in_src.shape[0] else NULL
    t.in_eid = &in_eid[0] if in_eid.shape[0] else NULL
    t.msgs = &msgs[0] if msgs.shape[0] else NULL
    t.nbytes = &nbytes[0] if nbytes.shape[0] else NULL
    t.lat = &lat[0, 0]
    t.bw = &bw[0, 0]
    t.has_bw = has_bw
    return t


def time_cost(const long long[::1] out_ptr, const long long[::1] dst,
              const double[::1] msgs, const double[::1] nbytes,
              const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
              const long long[::1] order):
    """The α-β time of the traffic under ``order``."""
    cdef long long n = lat.shape[0], i, e
    cdef double s = 0.0, x
    with nogil:
        for i in range(n):
            for e in range(out_ptr[i], out_ptr[i + 1]):
                x = msgs[e] * lat[order[i], order[dst[e]]]
                if has_bw:
                    x += nbytes[e] / bw[order[i], order[dst[e]]]
                s += x
    return s


def swap_delta(const long long[::1] out_ptr, const long long[::1] dst,
               const long long[::1] in_ptr, const long long[::1] in_src,
               const long long[::1] in_eid, const double[::1] msgs, const double[::1] nbytes,
               const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
               const long long[::1] order, long long i, long long j):
    """The change of :func:`time_cost` when ranks ``i`` and ``j`` swap processes."""
    if i == j:
        return 0.0
    cdef Net t = _net(out_ptr, dst, in_ptr, in_src, in_eid, msgs, nbytes, lat, bw, has_bw)
    return _delta(&t, &order[0], i, j)


def refine_time(const long long[::1] out_ptr, const long long[::1] dst,
                const long long[::1] in_ptr, const long long[::1] in_src,
                const long long[::1] in_eid, const double[::1] msgs, const double[::1] nbytes,
                const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                const long long[::1] near_ptr, const long long[::1] near_idx,
                long long[::1] order, unsigned long long seed, long long max_evals,
                long long max_moves, double time_limit, bint pinned, double tol, bint full):
    """Swap descent on :func:`time_cost`, ``order`` updated in place.

    Ranks wait in a queue (don't-look bits: a rank leaves it when no swap of
    it gains, and returns when a swap moves it or one of its traffic
    neighbours). For a rank ``i`` the partners are the ranks on the
    processes ``near_idx[near_ptr[r]:near_ptr[r + 1]]`` of every process
    ``r`` that runs one of ``i``'s traffic neighbours (``full``: every
    rank); the best swap of ``i`` that gains more than ``tol`` is applied.
    ``pinned`` keeps rank 0 where it is. Returns ``(moves, evaluations,
    stop)``, stop 0: local optimum, 1: ``time_limit`` (seconds, 0: none),
    2: ``max_evals`` (0: none), 3: ``max_moves`` (0: none).
    """
    cdef long long n = lat.shape[0], i, j, k, r, a, x, e, bj, head = 0, cnt = 0
    cdef long long moves = 0, evals = 0, stamp = 0, tmp
    cdef int stop = 0
    cdef double d, best, t0 = now_s()
    cdef unsigned long long rs = seed
    if n < 2:
        return 0, 0, 0
    cdef Net t = _net(out_ptr, dst, in_ptr, in_src, in_eid, msgs, nbytes, lat, bw, has_bw)
    cdef long long *o = &order[0]
    cdef long long *inv = <long long *>malloc(n * sizeof(long long))
    cdef long long *queue = <long long *>malloc(n * sizeof(long long))
    cdef long long *mark = <long long *>malloc(n * sizeof(long long))
    cdef signed char *inq = <signed char *>malloc(n * sizeof(signed char))
    try:
        with nogil:
            for i in range(n):
                inv[o[i]] = i
                queue[i] = i
                inq[i] = 1
                mark[i] = -1
            for i in range(n - 1, 0, -1):
                k = rng_int(&rs, i + 1)
                tmp = queue[i]
                queue[i] = queue[k]
                queue[k] = tmp
            cnt = n
            while cnt > 0:
                i = queue[head]
                head = head + 1 if head + 1 < n else 0
                cnt -= 1
                inq[i] = 0
                if pinned and i == 0:
                    continue
                stamp += 1
                mark[i] = stamp
                best = -tol
                bj = -1
                if full:
                    for j in range(n):
                        if mark[j] == stamp or (pinned and j == 0):
                            continue
                        d = _delta(&t, o, i, j)
                        evals += 1
                        if d < best:
                            best = d
                            bj = j
                else:
                    # partners near each traffic neighbour (out-neighbours, then in-)
                    for a in range(out_ptr[i], out_ptr[i + 1] + in_ptr[i + 1] - in_ptr[i]):
                        if a < out_ptr[i + 1]:
                            k = dst[a]
                        else:
                            k = in_src[in_ptr[i] + a - out_ptr[i + 1]]
                        r = o[k]
                        for x in range(near_ptr[r], near_ptr[r + 1]):
                            j = inv[near_idx[x]]
                            if mark[j] == stamp or (pinned and j == 0):
                                continue
                            mark[j] = stamp
                            d = _delta(&t, o, i, j)
                            evals += 1
                            if d < best:
                                best = d
                                bj = j
                if bj >= 0:
                    tmp = o[i]
                    o[i] = o[bj]
                    o[bj] = tmp
                    inv[o[i]] = i
                    inv[o[bj]] = bj
                    moves += 1
                    # the two ranks and their traffic neighbours look again
                    for x in range(2):
                        r = i if x == 0 else bj
                        if not inq[r]:
                            inq[r] = 1
                            queue[(head + cnt) % n] = r
                            cnt += 1
                        for e in range(out_ptr[r], out_ptr[r + 1]):
                            k = dst[e]
                            if not inq[k]:
                                inq[k] = 1
                                queue[(head + cnt) % n] = k
                                cnt += 1
                        for e in range(in_ptr[r], in_ptr[r + 1]):
                            k = in_src[e]
                            if not inq[k]:
                                inq[k] = 1
                                queue[(head + cnt) % n] = k
                                cnt += 1
                    if max_moves > 0 and moves >= max_moves:
                        stop = 3
                        break
                if max_evals > 0 and evals >= max_evals:
                    stop = 2
                    break
                if time_limit > 0 and (stamp & 63) == 0 and now_s() - t0 >= time_limit:
                    stop = 1
                    break
    finally:
        free(inv)
        free(queue)
        free(mark)
        free(inq)
    return moves, evals, stop


def greedy_place(const long long[::1] out_ptr, const long long[::1] dst,
                 const long long[::1] in_ptr, const long long[::1] in_src,
                 const long long[::1] in_eid, const double[::1] msgs, const double[::1] nbytes,
                 const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 const double[::1] weight, long long first_proc, long long[::1] order):
    """A constructive order, written to ``order``: the rank with most traffic
    first, on ``first_proc``; then, one at a time, the unplaced rank with most
    traffic (``weight``, per out-edge; in-edges by ``in_eid``) to placed ranks
    (ties: most traffic in all), on the free process where its time to the
    placed ranks is least (none placed: the free process nearest the last
    one placed). O(n^2 + n * free * degree)."""
    cdef long long n = lat.shape[0], i, k, v, f, bf, step, e, last
    cdef double bc, c
    if n == 0:
        return
    cdef Net t = _net(out_ptr, dst, in_ptr, in_src, in_eid, msgs, nbytes, lat, bw, has_bw)
    cdef double *conn = <double *>malloc(n * sizeof(double))
    cdef double *deg = <double *>malloc(n * sizeof(double))
    cdef signed char *placed = <signed char *>malloc(n * sizeof(signed char))
    cdef signed char *used = <signed char *>malloc(n * sizeof(signed char))
    cdef long long *o = &order[0]
    try:
        with nogil:
            for i in range(n):
                conn[i] = 0.0
                deg[i] = 0.0
                placed[i] = 0
                used[i] = 0
                o[i] = -1
            for i in range(n):
                for e in range(out_ptr[i], out_ptr[i + 1]):
                    deg[i] += weight[e]
                    deg[dst[e]] += weight[e]
            last = first_proc
            for step in range(n):
                v = -1
                for i in range(n):
                    if placed[i]:
                        continue
                    if v < 0 or conn[i] > conn[v] or (conn[i] == conn[v] and deg[i] > deg[v]):
                        v = i
                bf = -1
                bc = 0.0
                if step == 0:
                    bf = first_proc
                elif conn[v] <= 0.0:
                    for f in range(n):
                        if used[f]:
                            continue
                        c = lat[last, f]
                        if bf < 0 or c < bc:
                            bf = f
                            bc = c
                else:
                    for f in range(n):
                        if used[f]:
                            continue
                        c = 0.0
                        for e in range(out_ptr[v], out_ptr[v + 1]):
                            k = dst[e]
                            if placed[k]:
                                c += _c(&t, e, f, o[k])
                        for e in range(in_ptr[v], in_ptr[v + 1]):
                            k = in_src[e]
                            if placed[k]:
                                c += _c(&t, in_eid[e], o[k], f)
                        if bf < 0 or c < bc:
                            bf = f
                            bc = c
                o[v] = bf
                used[bf] = 1
                placed[v] = 1
                last = bf
                for e in range(out_ptr[v], out_ptr[v + 1]):
                    conn[dst[e]] += weight[e]
                for e in range(in_ptr[v], in_ptr[v + 1]):
                    conn[in_src[e]] += weight[in_eid[e]]
    finally:
        free(conn)
        free(deg)
        free(placed)
        free(used)
