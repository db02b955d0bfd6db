# Pairwise all-to-all (alpha-beta, no uplinks): full cost and swap deltas.
#
# Step s (1 <= s < n) pairs rank k with k ^ s (n a power of two: exchange)
# or sends from k to (k + s) % n. Every transfer carries c = nbytes / n, so
# a transfer a -> b takes T[a, b] = lat[a, b] + c / bw[a, b]. For exchanges
# a step lasts max over pairs of Tsym = max(T, T^T), so only half the pairs
# are visited. Each step keeps its largest transfer values (sorted, with the
# transfer ids) so that a swap, which changes two pairs (four transfers) per
# step, costs O(1) per step unless all listed values were removed. The NumPy
# twin is rankopt.models.network.reference_time.

from libc.string cimport memcpy
from _model_common cimport has_id, top_drop, top_insert
from rankopt.models._swap_eval cimport SwapEval

cdef enum:
    K = 8  # top values kept per step


cdef class PairwiseEval(SwapEval):
    """Evaluator of pairwise all-to-all; caches the last order seen (``cur``).

    ``cost``, ``batch_cost``, ``swap_delta(s)`` and ``search`` come from
    :class:`SwapEval`.
    """

    cdef const double[:, ::1] T
    cdef const double[:, ::1] TT
    cdef double[:, ::1] tv
    cdef long long[:, ::1] ti
    cdef long long[::1] tn
    cdef double[::1] st
    cdef double[::1] m
    cdef long long[::1] rk
    cdef bint xor
    cdef long long ids[4]
    cdef double vals[4]
    cdef int nid

    def __init__(self, const double[:, ::1] T, const double[:, ::1] TT, bint xor):
        """``T``: transfer times (``Tsym`` for exchanges); ``TT``: its transpose."""
        import numpy as np
        self.T = T
        self.TT = TT
        self.xor = xor
        self._init_cache(T.shape[0])
        self.tv = np.zeros((self.n, K), dtype=np.float64)
        self.ti = np.zeros((self.n, K), dtype=np.int64)
        self.tn = np.zeros(self.n, dtype=np.int64)
        self.st = np.zeros(self.n, dtype=np.float64)
        self.m = np.zeros(self.n, dtype=np.float64)
        self.rk = np.zeros(self.n, dtype=np.int64)

    cdef inline long long _dst(self, long long k, long long s) noexcept nogil:
        return k ^ s if self.xor else (k + s) % self.n

    cdef double _full(self, const long long[::1] o) noexcept nogil:
        """Streams the matrix row by row (original ranks): the transfer between
        processes ``a`` and ``b`` runs in step ``rk[a] ^ rk[b]`` (exchanges) or
        ``(rk[b] - rk[a]) % n`` where ``rk`` is the inverse of ``o``."""
        cdef Py_ssize_t a, b, s, n = self.n
        cdef long long ra
        cdef double v, total = 0.0
        cdef const double *row
        cdef double *m = &self.m[0]
        cdef long long *rk = &self.rk[0]
        for s in range(n):
            m[s] = 0.0
            rk[o[s]] = s
        for a in range(n):
            row = &self.T[a, 0]
            ra = rk[a]
            if self.xor:
                for b in range(a + 1, n):
                    v = row[b]
                    s = ra ^ rk[b]
                    if v > m[s]:
                        m[s] = v
            else:
                for b in range(n):
                    v = row[b]
                    s = rk[b] - ra
                    if s < 0:
                        s += n
                    if v > m[s]:
                        m[s] = v
        for s in range(1, n):
            total += m[s]
        return total

    # ---------------------------------------------------- per-step top lists
    cdef void _insert(self, Py_ssize_t s, double v, long long e, bint complete) noexcept nogil:
        """Insert into the sorted (descending) list of step ``s`` if it stays the top values."""
        top_insert(&self.tv[s, 0], &self.ti[s, 0], &self.tn[s], K, v, e, complete)

    cdef double _scan(self, Py_ssize_t s, bint keep) noexcept nogil:
        cdef Py_ssize_t k, cnt = 0
        cdef long long j
        cdef double v, mx = 0.0
        if keep:
            self.tn[s] = 0
        for k in range(self.n):
            j = self._dst(k, s)
            if self.xor and j < k:
                continue
            v = self.T[self.cur[k], self.cur[j]]
            if keep:
                self._insert(s, v, k, self.tn[s] == cnt)
            cnt += 1
            if v > mx:
                mx = v
        if keep:
            self.st[s] = mx
        return mx

    cdef void _rebuild(self, const long long[::1] order) noexcept nogil:
        cdef Py_ssize_t s
        memcpy(&self.cur[0], &order[0], self.n * sizeof(long long))
        for s in range(1, self.n):
            self._scan(s, True)
        self.valid = True

    cdef void _changed(self, long long i, long long j, long long s) noexcept nogil:
        """Ids and new values (under ``o``, already swapped) of the transfers of
        step ``s`` that involve new ranks ``i`` or ``j``."""
        cdef long long x, e, q
        cdef int t
        cdef bint dup
        self.nid = 0
        for t in range(4 if not self.xor else 2):
            x = i if t % 2 == 0 else j
            if self.xor:
                e = x if x < (x ^ s) else x ^ s
            elif t < 2:
                e = x
            else:
                e = (x - s + self.n) % self.n
            dup = False
            for q in range(self.nid):
                if self.ids[q] == e:
                    dup = True
            if dup:
                continue
            self.ids[self.nid] = e
            if self.xor or t < 2:  # row of the swapped rank x
                self.vals[self.nid] = self.T[self.cur[x], self.cur[self._dst(x, s)]]
            else:
                self.vals[self.nid] = self.TT[self.cur[x], self.cur[e]]
            self.nid += 1

    cdef double _step_new(self, Py_ssize_t s) noexcept nogil:
        """Step time after the change recorded by ``_changed``."""
        cdef Py_ssize_t t, q
        cdef double mx = 0.0
        for q in range(self.nid):
            if self.vals[q] > mx:
                mx = self.vals[q]
        for t in range(self.tn[s]):
            if not has_id(self.ids, self.nid, self.ti[s, t]):
                return mx if mx > self.tv[s, t] else self.tv[s, t]
        return self._scan(s, False)  # every listed value changed: rescan

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef long long s, tmp
        cdef double d = 0.0
        if i == j:
            return 0.0
        tmp = self.cur[i]
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp
        for s in range(1, self.n):
            if self.xor and (i ^ s) == j:
                continue  # the pair (i, j) only turns around
            self._changed(i, j, s)
            d += self._step_new(s) - self.st[s]
        self.cur[j] = self.cur[i]
        self.cur[i] = tmp
        return d

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef long long s, tmp
        cdef Py_ssize_t m, q
        tmp = self.cur[i]
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp
        for s in range(1, self.n):
            if self.xor and (i ^ s) == j:
                continue
            self._changed(i, j, s)
            m = top_drop(&self.tv[s, 0], &self.ti[s, 0], self.tn[s], self.ids, self.nid)
            self.tn[s] = m  # the changed transfers dropped, the order kept
            if m < K // 2:
                self._scan(s, True)
                continue
            for q in range(self.nid):
                self._insert(s, self.vals[q], self.ids[q], False)
            self.st[s] = self.tv[s, 0]

    # ------------------------------------------------------------ python API
    def step_times(self, const long long[::1] order):
        """Duration of steps 1 .. n-1 from the incremental state."""
        import numpy as np
        with nogil:
            self._sync(order)
        return np.asarray(self.st)[1:].copy()
