# Candidate lists for the ring searches: the k nearest other processes of
# each process, and the k alpha-nearest (Helsgaun's alpha-nearness from
# minimum 1-trees under subgradient node penalties, as in LKH).
#
# ``w`` is a symmetric weight matrix; the kernels trust their inputs. The
# searches of _ring_search and _ring_directed walk these lists nearest first.

from cython cimport floating
from libc.math cimport INFINITY, NAN, isnan
from libc.stdlib cimport malloc, free

from _heap cimport heap_pop, heap_push
from _ring_common cimport now_s

import numpy as np


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


cdef double prim(const floating[:, ::1] w, const double *pi, long long n, long long *par,
                 long long *order, double *key, long long *deg,
                 long long *rest) noexcept nogil:
    """Minimum spanning tree of w[i, j] + pi[i] + pi[j] (dense Prim, O(n^2)).

    Fills the parent of each vertex, the order vertices joined the tree
    (parents first) and the degrees; returns the weight of the tree plus the
    cheapest second link of a leaf, a 1-tree. ``rest`` (n entries) and ``key``
    (2 n) are work space: the vertices not yet in the tree, with their keys and
    penalties alongside, so each step scans only those (n^2 / 2 reads in all,
    not n^2); of equally cheap vertices the lowest index joins first.
    """
    cdef long long i, j, k, t, best_t, nrest
    cdef double best = INFINITY, c, total = 0.0, pj
    cdef double *rkey = key  # the keys of ``rest``, in its order
    cdef double *rpi = key + n  # the penalties of ``rest``, in its order
    for i in range(n):
        deg[i] = 0
        par[i] = 0
    order[0] = 0
    par[0] = -1
    nrest = n - 1
    best_t = -1
    for t in range(nrest):
        rest[t] = t + 1
        rpi[t] = pi[t + 1]
        rkey[t] = w[0, t + 1] + pi[0] + rpi[t]
        if best_t < 0 or rkey[t] < best:
            best = rkey[t]
            best_t = t
    for k in range(1, n):
        j = rest[best_t]
        total += rkey[best_t]
        nrest -= 1
        rest[best_t] = rest[nrest]
        rkey[best_t] = rkey[nrest]
        rpi[best_t] = rpi[nrest]
        order[k] = j
        deg[j] += 1
        deg[par[j]] += 1
        # update the keys and pick the next vertex in the same pass
        pj = pi[j]
        best_t = -1
        for t in range(nrest):
            i = rest[t]
            c = w[j, i] + pj + rpi[t]
            if c < rkey[t]:
                rkey[t] = c
                par[i] = j
            if best_t < 0 or rkey[t] < best or (rkey[t] == best and i < rest[best_t]):
                best = rkey[t]
                best_t = t
    return close_one_tree(w, pi, n, par, deg, total, NULL, NULL)


cdef double close_one_tree(const floating[:, ::1] w, const double *pi, long long n,
                           const long long *par, long long *deg, double total,
                           const long long *start, const long long *adj) noexcept nogil:
    """``total`` (a spanning tree's weight, ``par`` its parents, ``deg`` its degrees)
    closed into a 1-tree at the leaf whose second-cheapest link is cheapest: that link
    added to ``total`` and to the degrees of its ends. A leaf's second link is any
    link but its one tree link (to its parent, or to its one child when it is the
    root); among ``adj[start[i] : start[i + 1]]`` only, unless ``adj`` is NULL."""
    cdef long long i, j, t, lo, hi, leaf = -1, best_j = -1
    cdef double c, extra = INFINITY
    for i in range(n):
        if deg[i] != 1:
            continue
        lo = 0 if adj == NULL else start[i]
        hi = n if adj == NULL else start[i + 1]
        for t in range(lo, hi):
            j = t if adj == NULL else adj[t]
            if j == i or par[i] == j or par[j] == i:
                continue
            c = w[i, j] + pi[i] + pi[j]
            if leaf < 0 or c < extra:
                extra = c
                best_j = j
                leaf = i
    if leaf >= 0:
        deg[leaf] += 1
        deg[best_j] += 1
        total += extra
    return total


cdef double sparse_prim(const floating[:, ::1] w, const double *pi, long long n,
                        const long long *start, const long long *adj, long long *par,
                        long long *deg, double *key, unsigned char *intree, double *hk,
                        long long *hv, long long *hp) noexcept nogil:
    """The 1-tree of :func:`prim` on the links of a sparse graph only (``adj[start[i]
    : start[i + 1]]`` the neighbours of i; a lazy binary heap, O(m log m)); NaN
    when the graph does not span every vertex. The leaf's second link is the
    cheapest of its graph's links outside the tree."""
    cdef long long i, j, t, v, frm, joined = 1
    cdef Py_ssize_t size = 0
    cdef double c, total = 0.0
    for i in range(n):
        deg[i] = 0
        par[i] = -1
        key[i] = INFINITY
        intree[i] = 0
    intree[0] = 1
    for t in range(start[0], start[1]):
        j = adj[t]
        c = w[0, j] + pi[0] + pi[j]
        if c < key[j]:
            key[j] = c
            heap_push(hk, hv, hp, &size, c, j, 0)
    while size > 0 and joined < n:
        c = hk[0]
        v = hv[0]
        frm = hp[0]
        heap_pop(hk, hv, hp, &size)
        if intree[v]:
            continue
        intree[v] = 1
        joined += 1
        par[v] = frm
        deg[v] += 1
        deg[frm] += 1
        total += c
        for t in range(start[v], start[v + 1]):
            j = adj[t]
            if intree[j]:
                continue
            c = w[v, j] + pi[v] + pi[j]
            if c < key[j]:
                key[j] = c
                heap_push(hk, hv, hp, &size, c, j, v)
    if joined < n:
        return NAN
    return close_one_tree(w, pi, n, par, deg, total, start, adj)


def alpha_candidates(const floating[:, ::1] w, int k, int iterations=50, int sparse=0,
                     double time_limit=0.0):
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

    ``sparse`` > 0: the subgradient steps after the first price the 1-tree on a
    sparse graph only, each process's ``sparse`` nearest links and the links of
    the first (dense) step's tree, O(n * sparse * log n) a step instead of
    O(n^2) (a step whose sparse graph spans no tree is dense). The bound
    returned is the larger of the first step's and the final penalties' dense
    1-trees, both true 1-trees; the alpha values are the final dense tree's.

    ``time_limit`` > 0: no subgradient step after the first starts later than
    that many seconds from the call (the final dense tree and the alpha values
    are computed all the same).
    """
    cdef Py_ssize_t n = w.shape[0]
    cdef long long i, j, t, _it, u, cnt
    cdef double step, bound, best_bound = -INFINITY, true_bound = -INFINITY, c, mean_w = 0.0
    cdef double deadline
    cdef bint dense
    if k > n - 1:
        k = n - 1
    out_np = np.empty((n, k), dtype=np.int64)
    cdef long long[:, ::1] out = out_np
    pi_np = np.zeros(n, dtype=np.float64)
    cdef double[::1] pi_best = pi_np
    cdef double[::1] pi = np.zeros(n, dtype=np.float64)
    cdef double[::1] prev_v = np.zeros(n, dtype=np.float64)
    cdef double[::1] key = np.empty(2 * n, dtype=np.float64)
    cdef double[::1] beta = np.empty(n, dtype=np.float64)
    cdef double[::1] tw = np.empty(n, dtype=np.float64)
    cdef double[::1] best = np.empty(k + 1, dtype=np.float64)
    cdef double[::1] bw = np.empty(k + 1, dtype=np.float64)
    cdef long long[::1] par = np.empty(n, dtype=np.int64)
    cdef long long[::1] order = np.empty(n, dtype=np.int64)
    cdef long long[::1] deg = np.empty(n, dtype=np.int64)
    cdef unsigned char[::1] onpath = np.empty(n, dtype=np.uint8)
    cdef long long[::1] rest = np.empty(n, dtype=np.int64)
    cdef bint use_sparse = sparse > 0 and iterations > 1 and n > sparse + 1
    cdef long long kk = min(sparse, n - 1) if use_sparse else 0
    cdef long long m = 2 * n * (kk + 1) if use_sparse else 1
    cdef long long[:, ::1] near = knn_lists(w, kk) if use_sparse else np.zeros((1, 1), np.int64)
    cdef long long[::1] start = np.zeros(n + 1, dtype=np.int64)
    cdef long long[::1] fill = np.zeros(n + 1, dtype=np.int64)
    cdef long long[::1] adj = np.empty(m, dtype=np.int64)
    cdef double[::1] hk = np.empty(m + 1, dtype=np.float64)
    cdef long long[::1] hv = np.empty(m + 1, dtype=np.int64)
    cdef long long[::1] hp = np.empty(m + 1, dtype=np.int64)
    cdef unsigned char[::1] intree = np.empty(n, dtype=np.uint8)
    cdef bint graph = False
    with nogil:
        for i in range(n):
            pi[i] = 0.0
            prev_v[i] = 0.0
            if iterations > 0:  # the step size's scale: no pass over w without steps
                for j in range(n):
                    mean_w += w[i, j]
        mean_w /= <double>(n * n)
        step = 0.01 * mean_w
        deadline = now_s() + time_limit if time_limit > 0.0 else 0.0
        for _it in range(iterations):
            if deadline > 0.0 and _it > 0 and now_s() > deadline:
                break
            bound = NAN
            if graph:
                bound = sparse_prim(w, &pi[0], n, &start[0], &adj[0], &par[0], &deg[0],
                                    &key[0], &intree[0], &hk[0], &hv[0], &hp[0])
            dense = isnan(bound)
            if dense:
                bound = prim(w, &pi[0], n, &par[0], &order[0], &key[0], &deg[0], &rest[0])
            for i in range(n):
                bound -= 2.0 * pi[i]
            if dense and bound > true_bound:
                true_bound = bound
            if bound > best_bound:
                best_bound = bound
                for i in range(n):
                    pi_best[i] = pi[i]
            if use_sparse and not graph:
                # the sparse graph: the nearest links and this tree's, both ways
                for i in range(n):
                    fill[i + 1] = kk
                for i in range(1, n):
                    fill[i + 1] += 1
                    fill[par[i] + 1] += 1
                for i in range(n):
                    for t in range(kk):
                        fill[near[i, t] + 1] += 1
                for i in range(n):
                    start[i + 1] = start[i] + fill[i + 1]
                    fill[i] = start[i]
                for i in range(n):
                    for t in range(kk):
                        u = near[i, t]
                        adj[fill[i]] = u
                        fill[i] += 1
                        adj[fill[u]] = i
                        fill[u] += 1
                for i in range(1, n):
                    u = par[i]
                    adj[fill[i]] = u
                    fill[i] += 1
                    adj[fill[u]] = i
                    fill[u] += 1
                graph = True
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
        bound = prim(w, &pi[0], n, &par[0], &order[0], &key[0], &deg[0], &rest[0])
        for i in range(n):
            bound -= 2.0 * pi[i]
        if bound > true_bound:
            true_bound = bound
        if use_sparse:
            best_bound = true_bound
        # each process's penalised link to its tree parent, read once: the loops below
        # would otherwise read w[j, par[j]] for every i, a cache miss each on a large matrix
        for j in range(n):
            tw[j] = w[j, par[j]] + pi[j] + pi[par[j]] if par[j] >= 0 else 0.0
        for i in range(n):
            # beta[j]: heaviest tree link on the path i .. j
            for j in range(n):
                onpath[j] = 0
            beta[i] = -INFINITY
            onpath[i] = 1
            u = i
            while par[u] >= 0:
                c = tw[u]
                beta[par[u]] = beta[u] if beta[u] > c else c
                onpath[par[u]] = 1
                u = par[u]
            for t in range(n):
                j = order[t]
                if onpath[j]:
                    continue
                c = tw[j]
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
