# Held-Karp dynamic programming for the directed ring sum (exact, O(2^n n^2)).

from libc.math cimport INFINITY

import numpy as np


def held_karp(const double[:, ::1] w):
    """Optimal directed Hamiltonian cycle through 0; returns (cost, order)."""
    cdef Py_ssize_t n = w.shape[0]
    cdef Py_ssize_t m = n - 1            # cities 1..n-1 are bits 0..m-1
    cdef Py_ssize_t full = (<Py_ssize_t>1) << m
    dp_np = np.full((full, m), np.inf)
    par_np = np.full((full, m), -1, dtype=np.int64)
    cdef double[:, ::1] dp = dp_np
    cdef long long[:, ::1] par = par_np
    cdef Py_ssize_t s, j, k, prev
    cdef double c, best
    with nogil:
        for j in range(m):
            dp[(<Py_ssize_t>1) << j, j] = w[0, j + 1]
        for s in range(1, full):
            for j in range(m):
                if not (s >> j) & 1 or dp[s, j] == INFINITY:
                    continue
                c = dp[s, j]
                for k in range(m):
                    if (s >> k) & 1:
                        continue
                    if c + w[j + 1, k + 1] < dp[s | ((<Py_ssize_t>1) << k), k]:
                        dp[s | ((<Py_ssize_t>1) << k), k] = c + w[j + 1, k + 1]
                        par[s | ((<Py_ssize_t>1) << k), k] = j
    best = np.inf
    last = -1
    for j in range(m):
        if dp[full - 1, j] + w[j + 1, 0] < best:
            best = dp[full - 1, j] + w[j + 1, 0]
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
