# Candidate lists for the ring searches: the k nearest other processes of
# each process, and the k alpha-nearest (Helsgaun's alpha-nearness from
# minimum 1-trees under subgradient node penalties, as in LKH).
#
# ``w`` is a symmetric weight matrix; the kernels trust their inputs. The
# searches of _ring_search and _ring_directed walk these lists nearest first.

from cython cimport floating
from libc.math cimport INFINITY
from libc.stdlib cimport malloc, free

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
    cdef double best = INFINITY, c, total = 0.0, extra, pj
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
    # close a 1-tree at the leaf whose second-cheapest link is cheapest (a leaf's
    # one tree link goes to its parent; the root's, when it is a leaf, to the
    # first vertex that joined, order[1])
    extra = INFINITY
    best_j = -1
    k = -1
    for i in range(n):
        if deg[i] != 1:
            continue
        t = par[i] if par[i] >= 0 else order[1]
        for j in range(n):
            if j == i or j == t:
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
    cdef double[::1] key = np.empty(2 * n, dtype=np.float64)
    cdef double[::1] beta = np.empty(n, dtype=np.float64)
    cdef double[::1] best = np.empty(k + 1, dtype=np.float64)
    cdef double[::1] bw = np.empty(k + 1, dtype=np.float64)
    cdef long long[::1] par = np.empty(n, dtype=np.int64)
    cdef long long[::1] order = np.empty(n, dtype=np.int64)
    cdef long long[::1] deg = np.empty(n, dtype=np.int64)
    cdef unsigned char[::1] onpath = np.empty(n, dtype=np.uint8)
    cdef long long[::1] rest = np.empty(n, dtype=np.int64)
    with nogil:
        for i in range(n):
            pi[i] = 0.0
            prev_v[i] = 0.0
            for j in range(n):
                mean_w += w[i, j]
        mean_w /= <double>(n * n)
        step = 0.01 * mean_w
        for _it in range(iterations):
            bound = prim(w, &pi[0], n, &par[0], &order[0], &key[0], &deg[0], &rest[0])
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
        prim(w, &pi[0], n, &par[0], &order[0], &key[0], &deg[0], &rest[0])
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
