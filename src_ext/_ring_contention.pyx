# Swap deltas of a ring schedule with shared uplinks in O(levels * log G).
#
# Every step of a ring sends c = frac * nbytes bytes over each ring edge
# k -> k+1 (positions), so the step time is a function of the ring's edges:
#
#   max over edges e of  lat_e + c / min(bw_e, up[L,g] / K[L,g] ...)
#   = max( max_e (lat_e + c / bw_e),                                 slot A
#          max over (level L, group g, direction d) with K > 0 of
#              (max lat of the edges leaving / entering g at L) + c / (up / K) )
#
# (division and addition round monotonically, so the two forms are equal to
# the last bit). Each (L, g, d) is a "slot" holding a multiset of edge values;
# a slot keeps its count K and its top values (every listed value >= every
# unlisted one, refilled by a scan of the group when it runs low). Slot terms
# sit in a tournament tree whose root is the step time, and the largest
# terms in a short sorted list (a move's untouched maximum). A swap changes at
# most four edges and so O(levels) slots; the NumPy twin is
# rankopt.models.network.reference_time.

from libc.string cimport memcmp
from _ring_common cimport now_s, rng_int

cdef double INF = float("inf")
cdef enum:
    K = 8  # top values kept per slot


cdef class RingContention:
    """Swap deltas (and full cost, through ``full``) of a ring with shared uplinks."""

    cdef const double[:, ::1] lat
    cdef const double[:, ::1] bw
    cdef const long long[:, ::1] lab
    cdef const double[:, ::1] up
    cdef const long long[:, ::1] gptr
    cdef const long long[::1] gmem
    cdef long long[::1] o
    cdef long long[::1] pos
    cdef double[:, ::1] tv
    cdef long long[:, ::1] ti
    cdef long long[::1] tn
    cdef long long[::1] cnt
    cdef double[::1] tree
    cdef double[::1] topv
    cdef long long[::1] tops
    cdef Py_ssize_t ntop, M
    cdef double c, reps
    cdef int has_bw, nlev
    cdef Py_ssize_t n, G, gbits, nslots, A, P
    cdef bint valid
    cdef public object full
    # scratch of one move
    cdef long long E[4]
    cdef long long oa[4]
    cdef long long ob[4]
    cdef long long na[4]
    cdef long long nb[4]
    cdef long long[::1] S
    cdef double[::1] saved
    cdef long long[::1] stamp
    cdef long long now
    cdef Py_ssize_t top
    cdef int ne, ns

    def __init__(self, full, const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 double c, double reps, const long long[:, ::1] labels,
                 const double[:, ::1] uplink, const long long[:, ::1] gptr,
                 const long long[::1] gmem):
        import numpy as np
        self.full = full
        self.lat = lat
        self.bw = bw
        self.has_bw = has_bw
        self.c = c
        self.reps = reps
        self.lab = labels
        self.up = uplink
        self.gptr = gptr
        self.gmem = gmem
        self.n = lat.shape[0]
        self.nlev = labels.shape[0]
        self.gbits = 0  # slot = ((level << gbits) | group) << 1 | direction
        while (1 << self.gbits) < uplink.shape[1]:
            self.gbits += 1
        self.G = 1 << self.gbits
        self.A = self.nlev * self.G * 2
        self.nslots = self.A + 1
        self.P = 1
        while self.P < self.nslots:
            self.P *= 2
        self.o = np.zeros(self.n, dtype=np.int64)
        self.pos = np.zeros(self.n, dtype=np.int64)
        self.tv = np.zeros((self.nslots, K), dtype=np.float64)
        self.ti = np.zeros((self.nslots, K), dtype=np.int64)
        self.tn = np.zeros(self.nslots, dtype=np.int64)
        self.cnt = np.zeros(self.nslots, dtype=np.int64)
        self.tree = np.full(2 * self.P, -INF)
        self.M = 2 + 16 * self.nlev  # more than the slots one move can touch
        self.topv = np.zeros(self.M, dtype=np.float64)
        self.tops = np.zeros(self.M, dtype=np.int64)
        self.S = np.zeros(1 + 16 * self.nlev, dtype=np.int64)
        self.saved = np.zeros(1 + 16 * self.nlev, dtype=np.float64)
        self.stamp = np.zeros(self.nslots, dtype=np.int64)
        self.now = 0
        self.valid = False

    # ------------------------------------------------------------ slot helpers
    cdef inline double _val(self, Py_ssize_t s, long long a, long long b) noexcept nogil:
        if s == self.A:
            return self.lat[a, b] + self.c / (self.bw[a, b] if self.has_bw else INF)
        return self.lat[a, b]

    cdef inline bint _member(self, Py_ssize_t s, long long a, long long b) noexcept nogil:
        cdef Py_ssize_t L, g, d
        if s == self.A:
            return True
        d = s & 1
        g = (s >> 1) & (self.G - 1)
        L = s >> (self.gbits + 1)
        if self.lab[L, a] == self.lab[L, b]:
            return False
        return self.lab[L, b if d else a] == g

    cdef inline double _term(self, Py_ssize_t s, double mx, long long count) noexcept nogil:
        cdef Py_ssize_t L, g
        if s == self.A:
            return mx
        if count <= 0:
            return -INF
        g = (s >> 1) & (self.G - 1)
        L = s >> (self.gbits + 1)
        return mx + self.c / (self.up[L, g] / count)

    cdef void _tset(self, Py_ssize_t s, double v) noexcept nogil:
        cdef Py_ssize_t k = self.P + s
        cdef double lt, rt
        self.tree[k] = v
        k //= 2
        while k >= 1:
            lt = self.tree[2 * k]
            rt = self.tree[2 * k + 1]
            self.tree[k] = lt if lt > rt else rt
            k //= 2

    cdef void _find_top(self) noexcept nogil:
        """The ``M`` largest slot terms, sorted (``top``: the largest)."""
        cdef Py_ssize_t s, t
        cdef double v
        self.ntop = 0
        for s in range(self.nslots):
            v = self.tree[self.P + s]
            if self.ntop == self.M:
                if v <= self.topv[self.M - 1]:
                    continue
                t = self.M - 1
            else:
                t = self.ntop
                self.ntop += 1
            while t > 0 and self.topv[t - 1] < v:
                self.topv[t] = self.topv[t - 1]
                self.tops[t] = self.tops[t - 1]
                t -= 1
            self.topv[t] = v
            self.tops[t] = s
        self.top = self.tops[0]

    cdef void _insert(self, Py_ssize_t s, double v, long long e) noexcept nogil:
        """Put ``v`` (not yet counted in ``cnt``) in the sorted (descending) top
        list when the list stays the largest values of the slot."""
        cdef Py_ssize_t t, m = self.tn[s]
        if m == K:
            if v <= self.tv[s, K - 1]:
                return
            m = K - 1
        elif m < self.cnt[s] and (m == 0 or v < self.tv[s, m - 1]):
            return
        t = m
        while t > 0 and self.tv[s, t - 1] < v:
            self.tv[s, t] = self.tv[s, t - 1]
            self.ti[s, t] = self.ti[s, t - 1]
            t -= 1
        self.tv[s, t] = v
        self.ti[s, t] = e
        self.tn[s] = m + 1

    cdef double _scan(self, Py_ssize_t s, bint keep) noexcept nogil:
        """Largest value of slot ``s`` under the current order (refills its list)."""
        cdef Py_ssize_t L, g, d, q, k, e
        cdef long long p, a, b
        cdef double mx = -INF, v
        if keep:
            self.tn[s] = 0
            self.cnt[s] = 0
        if s == self.A:
            for k in range(self.n):
                v = self._val(s, self.o[k], self.o[(k + 1) % self.n])
                if keep:
                    self._insert(s, v, k)
                    self.cnt[s] += 1
                if v > mx:
                    mx = v
            return mx
        d = s & 1
        g = (s >> 1) & (self.G - 1)
        L = s >> (self.gbits + 1)
        for q in range(self.gptr[L, g], self.gptr[L, g + 1]):
            p = self.gmem[L * self.n + q]
            if d == 0:
                e = self.pos[p]
                a = p
                b = self.o[(e + 1) % self.n]
                if self.lab[L, b] == g:
                    continue
            else:
                e = (self.pos[p] - 1 + self.n) % self.n
                a = self.o[e]
                b = p
                if self.lab[L, a] == g:
                    continue
            v = self.lat[a, b]
            if keep:
                self._insert(s, v, e)
                self.cnt[s] += 1
            if v > mx:
                mx = v
        return mx

    cdef void _rebuild(self, const long long[::1] order) noexcept nogil:
        cdef Py_ssize_t k, s, L
        cdef double mx
        for k in range(self.n):
            self.o[k] = order[k]
            self.pos[order[k]] = k
        for s in range(2 * self.P):
            self.tree[s] = -INF
        for s in range(self.nslots):
            self.tn[s] = 0
            self.cnt[s] = 0
        for L in range(self.nlev):  # only groups that are crossed get scanned
            for k in range(self.n):
                if self.lab[L, self.o[k]] != self.lab[L, self.o[(k + 1) % self.n]]:
                    self.cnt[(L * self.G + self.lab[L, self.o[k]]) * 2] = 1
                    self.cnt[(L * self.G + self.lab[L, self.o[(k + 1) % self.n]]) * 2 + 1] = 1
        for s in range(self.nslots):
            if s == self.A or self.cnt[s]:
                mx = self._scan(s, True)
                self.tree[self.P + s] = self._term(s, mx, self.cnt[s])
        for k in range(self.P - 1, 0, -1):
            self.tree[k] = self.tree[2 * k] if self.tree[2 * k] > self.tree[2 * k + 1] \
                else self.tree[2 * k + 1]
        self._find_top()
        self.valid = True

    # ---------------------------------------------------------------- a move
    cdef inline void _addslot(self, Py_ssize_t s) noexcept nogil:
        if self.stamp[s] != self.now:
            self.stamp[s] = self.now
            self.S[self.ns] = s
            self.ns += 1

    cdef void _begin(self, long long i, long long j) noexcept nogil:
        """Swap ``i``, ``j`` in ``o``/``pos``; record the changed edges and their slots."""
        cdef long long cand[4]
        cdef long long tmp, a, b
        cdef int q, r
        cdef Py_ssize_t L
        cdef bint dup
        cand[0] = (i - 1 + self.n) % self.n
        cand[1] = i
        cand[2] = (j - 1 + self.n) % self.n
        cand[3] = j
        self.ne = 0
        for q in range(4):
            dup = False
            for r in range(self.ne):
                if self.E[r] == cand[q]:
                    dup = True
            if not dup:
                self.E[self.ne] = cand[q]
                self.oa[self.ne] = self.o[cand[q]]
                self.ob[self.ne] = self.o[(cand[q] + 1) % self.n]
                self.ne += 1
        tmp = self.o[i]
        self.o[i] = self.o[j]
        self.o[j] = tmp
        self.pos[self.o[i]] = i
        self.pos[self.o[j]] = j
        self.ns = 0
        self.now += 1
        self._addslot(self.A)
        for q in range(self.ne):
            self.na[q] = self.o[self.E[q]]
            self.nb[q] = self.o[(self.E[q] + 1) % self.n]
            for L in range(self.nlev):
                for r in range(2):
                    a = self.oa[q] if r == 0 else self.na[q]
                    b = self.ob[q] if r == 0 else self.nb[q]
                    if self.lab[L, a] != self.lab[L, b]:
                        self._addslot((L * self.G + self.lab[L, a]) * 2)
                        self._addslot((L * self.G + self.lab[L, b]) * 2 + 1)

    cdef inline bint _in_e(self, long long e) noexcept nogil:
        cdef int q
        for q in range(self.ne):
            if self.E[q] == e:
                return True
        return False

    cdef void _unswap(self, long long i, long long j) noexcept nogil:
        cdef long long tmp = self.o[i]
        self.o[i] = self.o[j]
        self.o[j] = tmp
        self.pos[self.o[i]] = i
        self.pos[self.o[j]] = j

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef int q, h
        cdef Py_ssize_t s, t
        cdef long long rem, add, surv
        cdef double mx, v, before = self.tree[1], after
        if i == j:
            return 0.0
        self._begin(i, j)
        for h in range(self.ns):
            s = self.S[h]
            rem = 0
            add = 0
            surv = 0
            mx = -INF
            for q in range(self.ne):
                if self._member(s, self.oa[q], self.ob[q]):
                    rem += 1
                if self._member(s, self.na[q], self.nb[q]):
                    add += 1
                    v = self._val(s, self.na[q], self.nb[q])
                    if v > mx:
                        mx = v
            for t in range(self.tn[s]):  # sorted: the first survivor is the largest
                if not self._in_e(self.ti[s, t]):
                    surv = 1
                    if self.tv[s, t] > mx:
                        mx = self.tv[s, t]
                    break
            if surv == 0 and self.cnt[s] - rem > 0:
                mx = self._scan(s, False)
            self.saved[h] = self._term(s, mx, self.cnt[s] - rem + add)
        t = 0  # the largest untouched term: the first untouched one of the top list
        while t < self.ntop and self.stamp[self.tops[t]] == self.now:
            t += 1
        if t < self.ntop or self.ntop == self.nslots:
            after = self.topv[t] if t < self.ntop else -INF
            for h in range(self.ns):
                if self.saved[h] > after:
                    after = self.saved[h]
        else:
            for h in range(self.ns):
                v = self.saved[h]
                self.saved[h] = self.tree[self.P + self.S[h]]
                self._tset(self.S[h], v)
            after = self.tree[1]
            for h in range(self.ns - 1, -1, -1):
                self._tset(self.S[h], self.saved[h])
        self._unswap(i, j)
        return self.reps * (after - before)

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef int q, h
        cdef Py_ssize_t s, t, m
        cdef double mx
        if i == j:
            return
        self._begin(i, j)
        for h in range(self.ns):
            s = self.S[h]
            t = 0
            m = self.tn[s]
            m = 0
            for t in range(self.tn[s]):  # drop the changed edges, keep the order
                if not self._in_e(self.ti[s, t]):
                    self.tv[s, m] = self.tv[s, t]
                    self.ti[s, m] = self.ti[s, t]
                    m += 1
            self.tn[s] = m
            for q in range(self.ne):
                if self._member(s, self.oa[q], self.ob[q]):
                    self.cnt[s] -= 1
            for q in range(self.ne):
                if self._member(s, self.na[q], self.nb[q]):
                    self._insert(s, self._val(s, self.na[q], self.nb[q]), self.E[q])
                    self.cnt[s] += 1
            if self.tn[s] < K // 2 and self.tn[s] < self.cnt[s]:
                self._scan(s, True)
            mx = self.tv[s, 0] if self.tn[s] else -INF
            self._tset(s, self._term(s, mx, self.cnt[s]))
        self._find_top()

    cdef void _sync(self, const long long[::1] order) noexcept nogil:
        cdef Py_ssize_t k, p = -1, q = -1, nd = 0
        if self.valid and memcmp(&order[0], &self.o[0], self.n * sizeof(long long)) == 0:
            return
        if self.valid:
            for k in range(self.n):
                if order[k] != self.o[k]:
                    nd += 1
                    if nd == 1:
                        p = k
                    elif nd == 2:
                        q = k
                    else:
                        break
            if nd == 2 and order[p] == self.o[q] and order[q] == self.o[p]:
                self._apply(p, q)
                return
        self._rebuild(order)

    # ------------------------------------------------------------ python API
    def cost(self, const long long[::1] order):
        """Modelled seconds of the ring under ``order``."""
        return self.full.cost(order)

    def batch_cost(self, const long long[:, ::1] orders):
        """Costs of many orders, one per row."""
        return self.full.batch_cost(orders)

    def step_times(self, const long long[::1] order):
        """Duration of each distinct step under ``order``."""
        return self.full.step_times(order)

    def step_time(self, const long long[::1] order):
        """Duration of one ring step under ``order`` from the incremental state."""
        with nogil:
            self._sync(order)
        return self.tree[1]

    def swap_delta(self, const long long[::1] order, long long i, long long j):
        """Cost change when new ranks ``i`` and ``j`` swap processes."""
        with nogil:
            self._sync(order)
        return self._delta(i, j)

    def swap_deltas(self, const long long[::1] order, const long long[:, ::1] pairs):
        """Cost changes of many swaps (one ``(i, j)`` per row) from one order."""
        import numpy as np
        out_np = np.empty(pairs.shape[0], dtype=np.float64)
        cdef double[::1] out = out_np
        cdef Py_ssize_t r
        with nogil:
            self._sync(order)
            for r in range(pairs.shape[0]):
                out[r] = self._delta(pairs[r, 0], pairs[r, 1])
        return out_np

    def search(self, long long[::1] order, unsigned long long seed, long long max_moves,
               double time_limit, bint fixed0, double rel_tol):
        """First-improvement pairwise-swap local search, in place on ``order``.

        Same contract as ``StepEval.search``: returns ``(moves, evaluations,
        stop)`` with stop 0 = local optimum, 1 = time limit, 2 = max moves.
        """
        cdef unsigned long long state = seed
        cdef Py_ssize_t n = self.n, lo = 1 if fixed0 else 0, m = n - lo
        cdef long long moves = 0, evals = 0, since = 0, ii, jj, i, j, r
        cdef double t0 = now_s(), d, cost
        cdef int stop = 0
        if m < 2:
            return 0, 0, 0
        with nogil:
            self._sync(order)
            cost = self.reps * self.tree[1]
            ii = rng_int(&state, m)
            while True:
                i = lo + ii
                r = rng_int(&state, m)
                for jj in range(m):
                    j = lo + (r + jj) % m
                    if j == i:
                        continue
                    d = self._delta(i, j)
                    evals += 1
                    if d < -rel_tol * cost:
                        self._apply(i, j)
                        cost += d
                        moves += 1
                        since = 0
                        break
                since += 1
                if since > m:
                    break
                if max_moves > 0 and moves >= max_moves:
                    stop = 2
                    break
                if time_limit > 0 and now_s() - t0 > time_limit:
                    stop = 1
                    break
                ii = (ii + 1) % m
            for r in range(n):
                order[r] = self.o[r]
        return moves, evals, stop
