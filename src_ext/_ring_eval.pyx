# Ring cost evaluation: full costs and the O(1) move deltas, exposed for the
# models and for tests against the NumPy references.

from cython cimport floating
from _ring_common cimport delta_two_opt, delta_or_opt, cyc


def ring_sum(const floating[:, ::1] w, const long long[::1] order):
    """Sum of w[order[k], order[k+1]] around the ring (directed)."""
    cdef Py_ssize_t n = order.shape[0], k
    cdef double s = 0.0
    with nogil:
        for k in range(n - 1):
            s += w[order[k], order[k + 1]]
        s += w[order[n - 1], order[0]]
    return s


def ring_max(const floating[:, ::1] w, const long long[::1] order):
    """Largest edge w[order[k], order[k+1]] around the ring (directed)."""
    cdef Py_ssize_t n = order.shape[0], k
    cdef double m = w[order[n - 1], order[0]]
    with nogil:
        for k in range(n - 1):
            if w[order[k], order[k + 1]] > m:
                m = w[order[k], order[k + 1]]
    return m


def ring_sum_batch(const floating[:, ::1] w, const long long[:, ::1] orders):
    """Ring sums of many orders (one per row)."""
    import numpy as np
    cdef Py_ssize_t m = orders.shape[0], n = orders.shape[1], r, k
    out_np = np.empty(m, dtype=np.float64)
    cdef double[::1] out = out_np
    cdef double s
    with nogil:
        for r in range(m):
            s = w[orders[r, n - 1], orders[r, 0]]
            for k in range(n - 1):
                s += w[orders[r, k], orders[r, k + 1]]
            out[r] = s
    return out_np


def two_opt_delta(const floating[:, ::1] w, const long long[::1] order, long long i,
                  long long j):
    """Change of the symmetric ring sum when positions i+1..j are reversed."""
    cdef long long n = order.shape[0]
    return delta_two_opt(w, order[i], order[cyc(i + 1, n)], order[j], order[cyc(j + 1, n)])


def or_opt_delta(const floating[:, ::1] w, const long long[::1] order, long long i,
                 long long length, long long j, bint rev):
    """Change when the run at positions i..i+length-1 moves between j and j+1."""
    cdef long long n = order.shape[0]
    return delta_or_opt(w, order[cyc(i - 1, n)], order[i], order[cyc(i + length - 1, n)],
                        order[cyc(i + length, n)], order[j], order[cyc(j + 1, n)], rev)


def is_symmetric(const floating[:, ::1] a):
    """Whether ``a[i, j] == a[j, i]`` for every pair; allocates nothing.

    Blocked over tiles so that the transposed reads stay in cache; stops at
    the first tile with an asymmetric pair.
    """
    cdef Py_ssize_t n = a.shape[0], i0, j0, i, j, iend, jend, B = 64
    cdef bint sym = True
    with nogil:
        i0 = 0
        while i0 < n and sym:
            iend = i0 + B if i0 + B < n else n
            j0 = i0
            while j0 < n and sym:
                jend = j0 + B if j0 + B < n else n
                for i in range(i0, iend):
                    for j in range(j0 if j0 > i else i, jend):
                        if a[i, j] != a[j, i]:
                            sym = False
                j0 += B
            i0 += B
    return sym


def symmetrize(const floating[:, ::1] a, bint maximum=False):
    """The mean of both directions (``maximum``: their elementwise max), in ``a``'s dtype.

    One new (n, n) array; blocked over tiles so that the transposed reads stay
    in cache.
    """
    import numpy as np
    cdef Py_ssize_t n = a.shape[0], i0, j0, i, j, iend, jend, B = 64
    out_np = np.empty((n, n), dtype=np.float32 if floating is float else np.float64)
    cdef floating[:, ::1] out = out_np
    cdef floating x, y, v
    with nogil:
        i0 = 0
        while i0 < n:
            iend = i0 + B if i0 + B < n else n
            j0 = i0
            while j0 < n:
                jend = j0 + B if j0 + B < n else n
                for i in range(i0, iend):
                    for j in range(j0 if j0 > i else i, jend):
                        x = a[i, j]
                        y = a[j, i]
                        if maximum:
                            v = x if x > y else y
                        else:
                            v = <floating>(0.5 * (<double>x + <double>y))
                        out[i, j] = v
                        out[j, i] = v
                j0 += B
            i0 += B
    return out_np
