# Ring construction: nearest-neighbour and greedy-edge tours, the starts of
# the local searches in _ring_search and _ring_directed.
#
# ``w`` is a symmetric weight matrix; the kernels trust their inputs. The
# searches for a minimum keep an explicit "found" index (never a sentinel
# value that a weight could equal).

from cython cimport floating
from libc.math cimport INFINITY

import numpy as np


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
