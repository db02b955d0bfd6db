# Held-Karp dynamic programming for the directed ring sum (exact, O(2^n n^2)).
#
# Safe for every finite weight: a state counts as reached by an explicit flag,
# not by a sentinel cost that a sum of weights could equal, so every state has
# a parent and the order read back is always a permutation.

from cython cimport floating
import numpy as np


def held_karp(const floating[:, ::1] w):
    """Optimal directed Hamiltonian cycle through 0; returns (cost, order)."""
    cdef Py_ssize_t n = w.shape[0]
    cdef Py_ssize_t m = n - 1            # cities 1..n-1 are bits 0..m-1
    cdef Py_ssize_t full = (<Py_ssize_t>1) << m
    dp_np = np.zeros((full, m))
    par_np = np.full((full, m), -1, dtype=np.int64)
    seen_np = np.zeros((full, m), dtype=np.uint8)
    cdef double[:, ::1] dp = dp_np
    cdef long long[:, ::1] par = par_np
    cdef unsigned char[:, ::1] seen = seen_np
    cdef Py_ssize_t s, j, k, prev, t, last = -1
    cdef double c, best = 0.0
    with nogil:
        for j in range(m):
            dp[(<Py_ssize_t>1) << j, j] = w[0, j + 1]
            seen[(<Py_ssize_t>1) << j, j] = 1
        for s in range(1, full):
            for j in range(m):
                if not (s >> j) & 1 or not seen[s, j]:
                    continue
                for k in range(m):
                    if (s >> k) & 1:
                        continue
                    t = s | ((<Py_ssize_t>1) << k)
                    c = dp[s, j] + w[j + 1, k + 1]
                    if not seen[t, k] or c < dp[t, k]:
                        dp[t, k] = c
                        par[t, k] = j
                        seen[t, k] = 1
        for j in range(m):
            c = dp[full - 1, j] + w[j + 1, 0]
            if last < 0 or c < best:
                best = c
                last = j
    order = [0] * n
    s = full - 1
    j = last
    for k in range(n - 1, 0, -1):
        order[k] = j + 1
        prev = par[s, j]
        s ^= (<Py_ssize_t>1) << j
        j = prev
    return best, np.asarray(order, dtype=np.int64)
