# Compiled kernels of the ``map`` method (rankopt/solvers/mapping.py): process
# mapping of a job's point-to-point traffic onto a hierarchical network.
#
#   bisect        split a set of ranks into two parts of exact sizes with a
#                 small cut of the (symmetric) traffic graph: greedy graph
#                 growing from a pseudo-peripheral seed, then Fiduccia-
#                 Mattheyses passes whose moves alternate between the sides
#                 (every pair of moves is a swap, so balance stays exact);
#                 above a size, multilevel (heavy-edge matching, growths on
#                 the coarsest graph, FM on every level on the way back)
#   refine_time   first-improvement-by-rank swap descent on the α-β time of
#                 the traffic (sum over pairs of messages * latency + bytes /
#                 bandwidth), O(degree) per swap, with don't-look bits and
#                 candidate partners near the rank's traffic neighbours; with
#                 kicks, an iterated local search around it
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


cdef void _fm_pass_init(Sub *g, const signed char *side, Heap *h0, Heap *h1, double *gain,
                        signed char *locked) noexcept nogil:
    """The start of an FM pass: every vertex unlocked, its gain (cut edges less uncut
    ones) in the heap of its side."""
    cdef long long v, e
    cdef double wsum
    h0.size = 0
    h1.size = 0
    for v in range(g.m):
        wsum = 0.0
        for e in range(g.ptr[v], g.ptr[v + 1]):
            if side[g.adj[e]] != side[v]:
                wsum += g.w[e]
            else:
                wsum -= g.w[e]
        gain[v] = wsum
        locked[v] = 0
        h0.pos[v] = -1
    for v in range(g.m):
        if side[v] == 0:
            heap_push(h0, v, gain[v])
        else:
            heap_push(h1, v, gain[v])


cdef inline double _fm_move(Sub *g, long long v, int s, signed char *side,
                            signed char *locked, Heap *hs, Heap *h0, Heap *h1) noexcept nogil:
    """Move ``v`` (the top of ``hs``, side ``s``) to the other side and lock it; its
    unlocked neighbours' gains change by twice their edge to it (up on side ``s``,
    down on the other). Returns the move's gain."""
    cdef long long e, u
    cdef double gained = hs.key[v]
    cdef Heap *ho
    heap_remove(hs, v)
    locked[v] = 1
    side[v] = 1 - s
    for e in range(g.ptr[v], g.ptr[v + 1]):
        u = g.adj[e]
        if locked[u]:
            continue
        ho = h0 if side[u] == 0 else h1
        if side[u] == s:
            heap_add(ho, u, 2.0 * g.w[e])
        else:
            heap_add(ho, u, -2.0 * g.w[e])
    return gained


cdef double _fm(Sub *g, signed char *side, int passes, double tol, Heap *h0, Heap *h1,
                double *gain, signed char *locked, long long *moved) noexcept nogil:
    """Fiduccia-Mattheyses passes with exact balance; returns the cut gained."""
    cdef long long m = g.m, v, u, nm, best_nm, since, limit
    cdef int _pass, s, _half
    cdef double cum, best, total = 0.0
    cdef Heap *hs
    limit = 50 + m // 8
    for _pass in range(passes):
        _fm_pass_init(g, side, h0, h1, gain, locked)
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
                cum += _fm_move(g, v, s, side, locked, hs, h0, h1)
                moved[nm] = v
                nm += 1
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


# ---------------------------------------------------------------- multilevel bisection
# The graph is coarsened by heavy-edge matching (rating w(u, v)^2 / (c(u) c(v)),
# the "expansion*2" of KaFFPa, with c the vertex weights) until it has at most
# ``coarsen_to`` vertices; the coarsest graph is bisected by the best of ``tries``
# weighted growths, each refined by weighted FM; the sides are projected level by
# level and refined there by weighted FM within a slack of the level's heaviest
# vertex; on the input graph the sides are made exact and refined by the
# alternating FM above.
cdef enum:
    MAX_LEVELS = 64


cdef long long _match(Sub *g, const double *vw, double maxvw, unsigned long long *rs,
                      long long *perm, long long *match, long long *cmap,
                      long long *rep) noexcept nogil:
    """Heavy-edge matching; ``cmap`` the coarse vertex of each vertex, ``rep`` the
    first vertex of each coarse vertex. Returns the number of coarse vertices."""
    cdef long long m = g.m, v, u, k, e, best, mc = 0
    cdef double r, br
    for v in range(m):
        perm[v] = v
        match[v] = -1
        cmap[v] = -1
    for v in range(m - 1, 0, -1):
        k = rng_int(rs, v + 1)
        u = perm[v]
        perm[v] = perm[k]
        perm[k] = u
    for k in range(m):
        u = perm[k]
        if match[u] >= 0:
            continue
        best = -1
        br = 0.0
        for e in range(g.ptr[u], g.ptr[u + 1]):
            v = g.adj[e]
            if match[v] >= 0 or vw[u] + vw[v] > maxvw:
                continue
            r = g.w[e] * g.w[e] / (vw[u] * vw[v])
            if r > br:
                br = r
                best = v
        if best >= 0:
            match[u] = best
            match[best] = u
        else:
            match[u] = u
    for u in range(m):
        if cmap[u] < 0:
            cmap[u] = mc
            cmap[match[u]] = mc
            rep[mc] = u
            mc += 1
    return mc


cdef void _contract(Sub *g, const double *vw, const long long *match, const long long *cmap,
                    const long long *rep, Sub *cg, double *cvw, long long *slot) noexcept nogil:
    """The coarse graph ``cg`` (``cg.m`` set, arrays allocated) and its vertex weights."""
    cdef long long c, x, u, e, cc, ne = 0, start, half
    for c in range(cg.m):
        slot[c] = -1
    for c in range(cg.m):
        start = ne
        cg.ptr[c] = ne
        u = rep[c]
        cvw[c] = vw[u]
        if match[u] != u:
            cvw[c] += vw[match[u]]
        for half in range(2):
            x = u if half == 0 else match[u]
            if half == 1 and x == u:
                break
            for e in range(g.ptr[x], g.ptr[x + 1]):
                cc = cmap[g.adj[e]]
                if cc == c:
                    continue
                if slot[cc] < start:
                    slot[cc] = ne
                    cg.adj[ne] = cc
                    cg.w[ne] = g.w[e]
                    ne += 1
                else:
                    cg.w[slot[cc]] += g.w[e]
    cg.ptr[cg.m] = ne


cdef void _grow_w(Sub *g, const double *vw, double target, long long seed_v,
                  unsigned long long *rs, signed char *side, Heap *h,
                  long long *order_buf) noexcept nogil:
    """:func:`_grow` with vertex weights: side 0 grows until it weighs ``target``."""
    cdef long long m = g.m, v, e, u, k, nfree = 0
    cdef double w0 = 0.0
    for v in range(m):
        side[v] = 1
        h.pos[v] = -1
        order_buf[v] = v
    h.size = 0
    for v in range(m - 1, 0, -1):
        k = rng_int(rs, v + 1)
        u = order_buf[v]
        order_buf[v] = order_buf[k]
        order_buf[k] = u
    v = seed_v
    while w0 < target:
        if h.size == 0:
            if w0 > 0:
                while nfree < m and side[order_buf[nfree]] == 0:
                    nfree += 1
                if nfree >= m:
                    break
                v = order_buf[nfree]
        else:
            v = h.item[0]
            heap_remove(h, v)
        side[v] = 0
        w0 += vw[v]
        for e in range(g.ptr[v], g.ptr[v + 1]):
            u = g.adj[e]
            if side[u] == 0:
                continue
            if h.pos[u] < 0:
                heap_push(h, u, 0.0)
                _gain_init(g, u, side, h)
            else:
                heap_add(h, u, 2.0 * g.w[e])


cdef inline double _excess(double w0, double target, double dev) noexcept nogil:
    cdef double x = w0 - target
    if x < 0:
        x = -x
    return x - dev if x > dev else 0.0


cdef double _fm_w(Sub *g, const double *vw, signed char *side, double target, double dev,
                  int passes, double tol, Heap *h0, Heap *h1, double *gain,
                  signed char *locked, long long *moved) noexcept nogil:
    """Fiduccia-Mattheyses passes with vertex weights: side 0 within ``dev`` of
    ``target`` (an unbalanced start is first moved towards it: the sides with the
    least excess, then the smallest cut, are kept). Returns the cut gained."""
    cdef long long m = g.m, v, u, nm, best_nm, since, limit
    cdef int _pass, s
    cdef double cum, best, total = 0.0, w0 = 0.0, bad, best_bad, w_best
    cdef Heap *hs
    limit = 50 + m // 8
    for v in range(m):
        if side[v] == 0:
            w0 += vw[v]
    for _pass in range(passes):
        _fm_pass_init(g, side, h0, h1, gain, locked)
        cum = 0.0
        best = 0.0
        best_bad = _excess(w0, target, dev)
        w_best = w0
        nm = 0
        best_nm = 0
        since = 0
        while True:
            if w0 > target + dev:
                s = 0
            elif w0 < target - dev:
                s = 1
            else:
                s = -1
                if h0.size > 0 and _excess(w0 - vw[h0.item[0]], target, dev) == 0.0:
                    s = 0
                if h1.size > 0 and _excess(w0 + vw[h1.item[0]], target, dev) == 0.0:
                    if s < 0 or h1.key[h1.item[0]] > h0.key[h0.item[0]]:
                        s = 1
                if s < 0:
                    break
            hs = h0 if s == 0 else h1
            if hs.size == 0:
                break
            v = hs.item[0]
            cum += _fm_move(g, v, s, side, locked, hs, h0, h1)
            w0 += -vw[v] if s == 0 else vw[v]
            moved[nm] = v
            nm += 1
            bad = _excess(w0, target, dev)
            if bad < best_bad or (bad == best_bad and cum > best + tol):
                best_bad = bad
                best = cum
                best_nm = nm
                w_best = w0
                since = 0
            else:
                since += 1
                if since > limit:
                    break
        for v in range(nm - 1, best_nm - 1, -1):
            u = moved[v]
            side[u] = 1 - side[u]
        w0 = w_best
        total += best
        if best_nm == 0:
            break
    return total


cdef double _ml_bisect(Sub *g, long long size_a, long long coarsen_to, int tries,
                       int passes, double tol, unsigned long long *rs, signed char *out,
                       signed char *side, signed char *flag, long long *buf, Heap *h0,
                       Heap *h1, double *gain) noexcept nogil:
    """Multilevel bisection of ``g`` (see above) into ``out``; returns its cut.
    Scratch: ``side``, ``flag`` (m), ``buf`` (2 m), the heaps and ``gain`` (m)."""
    cdef Sub lev[MAX_LEVELS]
    cdef double *vws[MAX_LEVELS]
    cdef long long *cmaps[MAX_LEVELS]
    cdef double maxw[MAX_LEVELS]
    cdef long long nlev = 1, m = g.m, mc, L, v, ne, s0
    cdef double target = <double>size_a, cut, best_cut = -1.0, bad, best_bad = 0.0, maxvw
    cdef int _try
    cdef long long *match = <long long *>malloc(m * sizeof(long long))
    cdef long long *rep = <long long *>malloc(m * sizeof(long long))
    cdef signed char *cside
    lev[0] = g[0]
    vws[0] = <double *>malloc(m * sizeof(double))
    for v in range(m):
        vws[0][v] = 1.0
    maxw[0] = 1.0
    maxvw = 1.5 * m / coarsen_to
    if maxvw < 2.0:
        maxvw = 2.0
    # coarsen
    while lev[nlev - 1].m > coarsen_to and nlev < MAX_LEVELS:
        L = nlev - 1
        cmaps[L] = <long long *>malloc(lev[L].m * sizeof(long long))
        mc = _match(&lev[L], vws[L], maxvw, rs, buf, match, cmaps[L], rep)
        if mc > 0.9 * lev[L].m:
            free(cmaps[L])
            break
        ne = lev[L].ptr[lev[L].m]
        lev[nlev].m = mc
        lev[nlev].ptr = <long long *>malloc((mc + 1) * sizeof(long long))
        lev[nlev].adj = <long long *>malloc((ne + 1) * sizeof(long long))
        lev[nlev].w = <double *>malloc((ne + 1) * sizeof(double))
        vws[nlev] = <double *>malloc(mc * sizeof(double))
        _contract(&lev[L], vws[L], match, cmaps[L], rep, &lev[nlev], vws[nlev], buf)
        maxw[nlev] = 0.0
        for v in range(mc):
            if vws[nlev][v] > maxw[nlev]:
                maxw[nlev] = vws[nlev][v]
        nlev += 1
    # the coarsest graph: best of ``tries`` growths (least excess, then smallest cut)
    L = nlev - 1
    cside = <signed char *>malloc(m * sizeof(signed char))
    for _try in range(tries):
        s0 = _bfs_last(&lev[L], rng_int(rs, lev[L].m), buf, flag)
        _grow_w(&lev[L], vws[L], target, s0, rs, side, h0, buf)
        _fm_w(&lev[L], vws[L], side, target, maxw[L], passes, tol, h0, h1, gain, flag, buf)
        bad = 0.0
        for v in range(lev[L].m):
            if side[v] == 0:
                bad += vws[L][v]
        bad = _excess(bad, target, maxw[L])
        cut = _cut(&lev[L], side)
        if best_cut < 0 or bad < best_bad or (bad == best_bad and cut < best_cut - tol):
            best_cut = cut
            best_bad = bad
            for v in range(lev[L].m):
                cside[v] = side[v]
    # uncoarsen: project, refine within the level's slack
    while L > 0:
        L -= 1
        for v in range(lev[L].m):
            side[v] = cside[cmaps[L][v]]
        _fm_w(&lev[L], vws[L], side, target, maxw[L] if L > 0 else 1.0, passes, tol,
              h0, h1, gain, flag, buf)
        for v in range(lev[L].m):
            cside[v] = side[v]
    # exact sizes, then the alternating FM
    _fm_w(g, vws[0], side, target, 0.0, 1, tol, h0, h1, gain, flag, buf)
    _fm(g, side, passes, tol, h0, h1, gain, flag, buf)
    for v in range(m):
        out[v] = side[v]
    free(cside)
    free(vws[0])
    for L in range(1, nlev):
        free(lev[L].ptr)
        free(lev[L].adj)
        free(lev[L].w)
        free(vws[L])
        free(cmaps[L - 1])
    free(match)
    free(rep)
    return _cut(g, out)


def bisect(const long long[::1] xadj, const long long[::1] adj, const double[::1] w,
           const long long[::1] members, long long size_a, unsigned long long seed,
           int tries, int passes, long long[::1] loc, long long coarsen_to=0,
           int flat_tries=0, int cycles=1):
    """Split ``members`` into sides 0 (``size_a`` vertices) and 1 with a small cut.

    Above ``coarsen_to`` members (0: never), the best of ``cycles``
    multilevel bisections (:func:`_ml_bisect`: ``tries / cycles`` growths,
    rounded up, on the coarsest graph) and ``flat_tries`` growths on the
    members, each refined by FM; else the best of ``tries`` growths on the
    members. ``loc`` is scratch of length n, all -1, left all -1. Returns
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
    cdef signed char *mside = <signed char *>malloc(m * sizeof(signed char))
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
            if coarsen_to > 0 and m > coarsen_to:
                for _try in range(cycles):
                    cut = _ml_bisect(&g, size_a, coarsen_to, (tries + cycles - 1) // cycles,
                                     passes, tol, &rs, mside,
                                     side, flag, buf, &h0, &h1, gain)
                    if best_cut < 0 or cut < best_cut - tol:
                        best_cut = cut
                        for v in range(m):
                            bside[v] = mside[v]
                tries = flat_tries
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
        free(mside)
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


cdef inline void _swap(long long *o, long long *inv, long long i, long long j) noexcept nogil:
    cdef long long tmp = o[i]
    o[i] = o[j]
    o[j] = tmp
    inv[o[i]] = i
    inv[o[j]] = j


cdef void _undo(long long *o, long long *inv, const long long *log, long long nlog) noexcept nogil:
    """Undo the logged swaps, last first."""
    cdef long long x
    for x in range(nlog - 1, -1, -1):
        _swap(o, inv, log[2 * x], log[2 * x + 1])


cdef long long _wake(Net *t, long long r, signed char *inq, long long *queue, long long head,
                     long long cnt) noexcept nogil:
    """Rank ``r`` and its traffic neighbours back in the queue; returns its length."""
    cdef long long e, k, x
    for x in range(-1, t.out_ptr[r + 1] - t.out_ptr[r] + t.in_ptr[r + 1] - t.in_ptr[r]):
        if x < 0:
            k = r
        elif x < t.out_ptr[r + 1] - t.out_ptr[r]:
            k = t.dst[t.out_ptr[r] + x]
        else:
            e = t.in_ptr[r] + x - (t.out_ptr[r + 1] - t.out_ptr[r])
            k = t.in_src[e]
        if not inq[k]:
            inq[k] = 1
            queue[(head + cnt) % t.n] = k
            cnt += 1
    return cnt


def refine_time(const long long[::1] out_ptr, const long long[::1] dst,
                const long long[::1] in_ptr, const long long[::1] in_src,
                const long long[::1] in_eid, const double[::1] msgs, const double[::1] nbytes,
                const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                const long long[::1] near_ptr, const long long[::1] near_idx,
                long long[::1] order, unsigned long long seed, long long max_evals,
                long long max_moves, double time_limit, bint pinned, double tol, bint full,
                long long kicks=0):
    """Swap descent on :func:`time_cost`, ``order`` updated in place.

    Ranks wait in a queue (don't-look bits: a rank leaves it when no swap of
    it gains, and returns when a swap moves it or one of its traffic
    neighbours). For a rank ``i`` the partners are the ranks on the
    processes ``near_idx[near_ptr[r]:near_ptr[r + 1]]`` of every process
    ``r`` that runs one of ``i``'s traffic neighbours (``full``: every
    rank); the best swap of ``i`` that gains more than ``tol`` is applied.
    ``pinned`` keeps rank 0 where it is.

    ``kicks`` > 0: then an iterated local search. At each local optimum a
    random rank is swapped with a partner near one of its traffic neighbours
    (whatever the swap costs), the descent resumes from the ranks it touched,
    and the result is kept when it costs no more than the best so far, else
    undone; ``kicks`` such perturbations. Returns ``(moves, evaluations,
    stop)``, stop 0: local optimum, 1: ``time_limit`` (seconds, 0: none),
    2: ``max_evals`` (0: none), 3: ``max_moves`` (0: none).
    """
    cdef long long n = lat.shape[0], i, j, k, r, a, x, bj, head = 0, cnt = 0
    cdef long long moves = 0, evals = 0, stamp = 0, tmp, nlog = 0, deg
    cdef int stop = 0
    cdef bint ils = False, overflow = False
    cdef double d, best, t0 = now_s(), cur = 0.0, best_cur = 0.0
    cdef unsigned long long rs = seed
    if n < 2:
        return 0, 0, 0
    cdef Net t = _net(out_ptr, dst, in_ptr, in_src, in_eid, msgs, nbytes, lat, bw, has_bw)
    cdef long long *o = &order[0]
    cdef long long *inv = <long long *>malloc(n * sizeof(long long))
    cdef long long *queue = <long long *>malloc(n * sizeof(long long))
    cdef long long *mark = <long long *>malloc(n * sizeof(long long))
    cdef signed char *inq = <signed char *>malloc(n * sizeof(signed char))
    cdef long long log_cap = 8 * n if kicks > 0 else 1
    cdef long long *log = <long long *>malloc(2 * log_cap * sizeof(long long))
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
            while True:
                if cnt == 0:
                    # a local optimum: keep it or undo to the best, then a kick
                    if ils:
                        if cur <= best_cur or overflow:
                            best_cur = cur
                        else:
                            _undo(o, inv, log, nlog)
                            cur = best_cur
                        nlog = 0
                        overflow = False
                    if kicks <= 0 or full:
                        break
                    kicks -= 1
                    ils = True
                    best_cur = cur
                    i = rng_int(&rs, n)
                    deg = out_ptr[i + 1] - out_ptr[i] + in_ptr[i + 1] - in_ptr[i]
                    if deg == 0 or (pinned and i == 0):
                        continue
                    a = rng_int(&rs, deg)
                    if a < out_ptr[i + 1] - out_ptr[i]:
                        k = dst[out_ptr[i] + a]
                    else:
                        k = in_src[in_ptr[i] + a - (out_ptr[i + 1] - out_ptr[i])]
                    r = o[k]
                    if near_ptr[r + 1] == near_ptr[r]:
                        continue
                    j = inv[near_idx[near_ptr[r] + rng_int(&rs, near_ptr[r + 1] - near_ptr[r])]]
                    if j == i or (pinned and j == 0):
                        continue
                    cur += _delta(&t, o, i, j)
                    evals += 1
                    _swap(o, inv, i, j)
                    log[0] = i
                    log[1] = j
                    nlog = 1
                    cnt = _wake(&t, i, inq, queue, head, cnt)
                    cnt = _wake(&t, j, inq, queue, head, cnt)
                    continue
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
                    _swap(o, inv, i, bj)
                    moves += 1
                    cur += best
                    if ils:
                        if nlog < log_cap:
                            log[2 * nlog] = i
                            log[2 * nlog + 1] = bj
                            nlog += 1
                        else:
                            overflow = True
                    # the two ranks and their traffic neighbours look again
                    cnt = _wake(&t, i, inq, queue, head, cnt)
                    cnt = _wake(&t, bj, inq, queue, head, cnt)
                    if max_moves > 0 and moves >= max_moves:
                        stop = 3
                        break
                if max_evals > 0 and evals >= max_evals:
                    stop = 2
                    break
                if time_limit > 0 and (stamp & 63) == 0 and now_s() - t0 >= time_limit:
                    stop = 1
                    break
            if ils and cur > best_cur and not overflow:
                _undo(o, inv, log, nlog)  # a budget stopped a descent after a kick
    finally:
        free(inv)
        free(queue)
        free(mark)
        free(inq)
        free(log)
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
