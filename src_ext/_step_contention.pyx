# Swap deltas of a schedule with shared uplinks in O(levels log G) per step.
#
# When every transfer of a step carries the same c = frac * nbytes bytes, the
# step time is
#
#   max over transfers e of  lat_e + c / min(bw_e, up[L,g] / K[L,g] ...)
#   = max( max_e (lat_e + c / bw_e),                                 slot A
#          max over (level L, group g, direction d) with K > 0 of
#              (max lat of the transfers leaving / entering g at L) + c / (up / K) )
#
# where up is the uplink out of g (d = 0, transfers leaving g) or into g
# (d = 1, transfers entering g)
#
# (division and addition round monotonically, so the two forms are equal to
# the last bit). Each (step, L, g, d) is a "slot" holding a multiset of
# transfer values; a slot keeps its count K and its top values, sorted (every
# listed value >= every unlisted one; refilled by a scan of the group when it
# runs low). A step's slot terms sit in a tournament tree whose root is the
# step time, and its largest terms in a short sorted list. A swap changes the
# few transfers of ranks i and j in a step and so O(levels) slots. Rings (all
# steps alike) are one step with a repeat count. The NumPy twin is
# rankopt.models.network.reference_time.

from libc.math cimport INFINITY as INF
from _model_common cimport top_drop, top_first_kept, top_insert
from rankopt.models._swap_eval cimport SwapEval

cdef enum:
    K = 8  # top values kept per slot


cdef class StepContention(SwapEval):
    """Swap deltas (and full cost, through ``full``) of a schedule with shared uplinks.

    ``swap_delta(s)`` and ``search`` come from :class:`SwapEval`; the search
    starts from the cost held in the state.
    """

    cdef const double[:, ::1] lat
    cdef const double[:, ::1] bw
    cdef const long long[:, ::1] lab
    cdef const double[:, ::1] up
    cdef const double[:, ::1] upi
    cdef const long long[:, ::1] gptr
    cdef const long long[::1] gmem
    cdef const long long[::1] src
    cdef const long long[::1] dst
    cdef const long long[::1] ptr
    cdef const double[::1] c
    cdef const double[::1] reps
    cdef const long long[::1] sptr
    cdef const long long[::1] sidx
    cdef const long long[::1] rptr
    cdef const long long[::1] ridx
    cdef long long[::1] pos
    cdef double[:, ::1] tv
    cdef long long[:, ::1] ti
    cdef long long[::1] tn
    cdef long long[::1] cnt
    cdef double[::1] tree
    cdef double[::1] topv
    cdef long long[::1] tops
    cdef long long[::1] ntop
    cdef long long[::1] stamp
    cdef long long now
    cdef int has_bw, nlev
    cdef Py_ssize_t nsteps, G, gbits, nslots, A, P, M
    cdef public object full
    # scratch of one move in one step
    cdef long long[::1] E
    cdef long long[::1] oa
    cdef long long[::1] ob
    cdef long long[::1] na
    cdef long long[::1] nb
    cdef long long[::1] S
    cdef double[::1] saved
    cdef Py_ssize_t ne, ns

    def __init__(self, full, const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 const long long[:, ::1] labels, const double[:, ::1] uplink,
                 const double[:, ::1] uplink_in, const long long[:, ::1] gptr,
                 const long long[::1] gmem, const long long[::1] src, const long long[::1] dst,
                 const long long[::1] step_ptr, const double[::1] c, const double[::1] reps,
                 const long long[::1] sptr, const long long[::1] sidx,
                 const long long[::1] rptr, const long long[::1] ridx, long long maxe):
        import numpy as np
        self.full = full
        self.lat = lat
        self.bw = bw
        self.has_bw = has_bw
        self.lab = labels
        self.up = uplink
        self.upi = uplink_in
        self.gptr = gptr
        self.gmem = gmem
        self.src = src
        self.dst = dst
        self.ptr = step_ptr
        self.c = c
        self.reps = reps
        self.sptr = sptr
        self.sidx = sidx
        self.rptr = rptr
        self.ridx = ridx
        self._init_cache(lat.shape[0])
        self.nsteps = c.shape[0]
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
        ms = 1 + 4 * maxe * self.nlev  # slots one move can touch in one step
        self.M = ms + 1
        self.pos = np.zeros(self.n, dtype=np.int64)
        self.tv = np.zeros((self.nsteps * self.nslots, K), dtype=np.float64)
        self.ti = np.zeros((self.nsteps * self.nslots, K), dtype=np.int64)
        self.tn = np.zeros(self.nsteps * self.nslots, dtype=np.int64)
        self.cnt = np.zeros(self.nsteps * self.nslots, dtype=np.int64)
        self.stamp = np.zeros(self.nsteps * self.nslots, dtype=np.int64)
        self.tree = np.full(self.nsteps * 2 * self.P, -INF)
        self.topv = np.zeros(self.nsteps * self.M, dtype=np.float64)
        self.tops = np.zeros(self.nsteps * self.M, dtype=np.int64)
        self.ntop = np.zeros(self.nsteps, dtype=np.int64)
        self.E = np.zeros(maxe, dtype=np.int64)
        self.oa = np.zeros(maxe, dtype=np.int64)
        self.ob = np.zeros(maxe, dtype=np.int64)
        self.na = np.zeros(maxe, dtype=np.int64)
        self.nb = np.zeros(maxe, dtype=np.int64)
        self.S = np.zeros(ms, dtype=np.int64)
        self.saved = np.zeros(ms, dtype=np.float64)
        self.now = 0

    # ------------------------------------------------------------ slot helpers
    cdef inline double _val(self, Py_ssize_t s, Py_ssize_t sl, long long a,
                            long long b) noexcept nogil:
        if sl == self.A:
            return self.lat[a, b] + self.c[s] / (self.bw[a, b] if self.has_bw else INF)
        return self.lat[a, b]

    cdef inline bint _member(self, Py_ssize_t sl, long long a, long long b) noexcept nogil:
        cdef Py_ssize_t L, g, d
        if sl == self.A:
            return True
        d = sl & 1
        g = (sl >> 1) & (self.G - 1)
        L = sl >> (self.gbits + 1)
        if self.lab[L, a] == self.lab[L, b]:
            return False
        return self.lab[L, b if d else a] == g

    cdef inline double _term(self, Py_ssize_t s, Py_ssize_t sl, double mx,
                             long long count) noexcept nogil:
        cdef Py_ssize_t L, g
        if sl == self.A:
            return mx if mx > 0.0 else 0.0  # an empty step lasts 0
        if count <= 0:
            return -INF
        g = (sl >> 1) & (self.G - 1)
        L = sl >> (self.gbits + 1)
        if sl & 1:  # transfers entering g: its uplink into the group
            return mx + self.c[s] / (self.upi[L, g] / count)
        return mx + self.c[s] / (self.up[L, g] / count)

    cdef void _tset(self, Py_ssize_t s, Py_ssize_t sl, double v) noexcept nogil:
        cdef Py_ssize_t base = s * 2 * self.P, k = self.P + sl
        cdef double lt, rt
        self.tree[base + k] = v
        k //= 2
        while k >= 1:
            lt = self.tree[base + 2 * k]
            rt = self.tree[base + 2 * k + 1]
            self.tree[base + k] = lt if lt > rt else rt
            k //= 2

    cdef inline double _root(self, Py_ssize_t s) noexcept nogil:
        return self.tree[s * 2 * self.P + 1]

    cdef void _find_top(self, Py_ssize_t s) noexcept nogil:
        """The ``M`` largest slot terms of step ``s``, sorted."""
        cdef Py_ssize_t sl, t, m = 0, base = s * self.M, tb = s * 2 * self.P + self.P
        cdef double v
        for sl in range(self.nslots):
            v = self.tree[tb + sl]
            if m == self.M:
                if v <= self.topv[base + self.M - 1]:
                    continue
                t = self.M - 1
            else:
                t = m
                m += 1
            while t > 0 and self.topv[base + t - 1] < v:
                self.topv[base + t] = self.topv[base + t - 1]
                self.tops[base + t] = self.tops[base + t - 1]
                t -= 1
            self.topv[base + t] = v
            self.tops[base + t] = sl
        self.ntop[s] = m

    cdef void _insert(self, Py_ssize_t gs, double v, long long e) noexcept nogil:
        """Put ``v`` (not yet counted in ``cnt``) in the sorted (descending) top
        list of global slot ``gs`` when the list stays its largest values."""
        top_insert(&self.tv[gs, 0], &self.ti[gs, 0], &self.tn[gs], K, v, e,
                   self.tn[gs] >= self.cnt[gs])

    cdef double _scan(self, Py_ssize_t s, Py_ssize_t sl, bint keep) noexcept nogil:
        """Largest value of slot ``sl`` of step ``s`` under the current order."""
        cdef Py_ssize_t L, g, d, q, x, e, gs = s * self.nslots + sl
        cdef long long p, b, k
        cdef double mx = -INF, v
        if keep:
            self.tn[gs] = 0
            self.cnt[gs] = 0
        if sl == self.A:
            for e in range(self.ptr[s], self.ptr[s + 1]):
                v = self._val(s, sl, self.cur[self.src[e]], self.cur[self.dst[e]])
                self._take(gs, v, e, keep, &mx)
            return mx
        d = sl & 1
        g = (sl >> 1) & (self.G - 1)
        L = sl >> (self.gbits + 1)
        for q in range(self.gptr[L, g], self.gptr[L, g + 1]):
            p = self.gmem[L * self.n + q]
            k = s * self.n + self.pos[p]
            if d == 0:
                for x in range(self.sptr[k], self.sptr[k + 1]):
                    e = self.sidx[x]
                    b = self.cur[self.dst[e]]
                    if self.lab[L, b] != g:
                        self._take(gs, self.lat[p, b], e, keep, &mx)
            else:
                for x in range(self.rptr[k], self.rptr[k + 1]):
                    e = self.ridx[x]
                    b = self.cur[self.src[e]]
                    if self.lab[L, b] != g:
                        self._take(gs, self.lat[b, p], e, keep, &mx)
        return mx

    cdef inline void _take(self, Py_ssize_t gs, double v, long long e, bint keep,
                           double *mx) noexcept nogil:
        """One value of a slot scan: into the slot's list (``keep``) and the maximum."""
        if keep:
            self._insert(gs, v, e)
            self.cnt[gs] += 1
        if v > mx[0]:
            mx[0] = v

    cdef void _rebuild(self, const long long[::1] order) noexcept nogil:
        cdef Py_ssize_t k, s, L, sl, e, gs
        cdef long long a, b
        cdef double mx
        for k in range(self.n):
            self.cur[k] = order[k]
            self.pos[order[k]] = k
        for k in range(self.nsteps * 2 * self.P):
            self.tree[k] = -INF
        for k in range(self.nsteps * self.nslots):
            self.tn[k] = 0
            self.cnt[k] = 0
        for s in range(self.nsteps):
            for e in range(self.ptr[s], self.ptr[s + 1]):  # flag the crossed slots
                a = self.cur[self.src[e]]
                b = self.cur[self.dst[e]]
                for L in range(self.nlev):
                    if self.lab[L, a] != self.lab[L, b]:
                        self.cnt[s * self.nslots + (L * self.G + self.lab[L, a]) * 2] = 1
                        self.cnt[s * self.nslots + (L * self.G + self.lab[L, b]) * 2 + 1] = 1
            for sl in range(self.nslots):
                gs = s * self.nslots + sl
                if sl == self.A or self.cnt[gs]:
                    mx = self._scan(s, sl, True)  # before reading the count it sets
                    self.tree[s * 2 * self.P + self.P + sl] = self._term(s, sl, mx, self.cnt[gs])
            for k in range(self.P - 1, 0, -1):
                gs = s * 2 * self.P
                self.tree[gs + k] = self.tree[gs + 2 * k] \
                    if self.tree[gs + 2 * k] > self.tree[gs + 2 * k + 1] \
                    else self.tree[gs + 2 * k + 1]
            self._find_top(s)
        self.valid = True

    # ---------------------------------------------------------------- a move
    cdef inline void _addslot(self, Py_ssize_t s, Py_ssize_t sl) noexcept nogil:
        cdef Py_ssize_t gs = s * self.nslots + sl
        if self.stamp[gs] != self.now:
            self.stamp[gs] = self.now
            self.S[self.ns] = sl
            self.ns += 1

    cdef inline void _push(self, long long e) noexcept nogil:
        cdef Py_ssize_t q
        for q in range(self.ne):
            if self.E[q] == e:
                return
        self.E[self.ne] = e
        self.ne += 1

    cdef inline long long _old(self, long long x, long long i, long long j) noexcept nogil:
        """Process at new rank ``x`` before the swap of ``i``, ``j`` (``cur`` is swapped)."""
        if x == i:
            return self.cur[j]
        if x == j:
            return self.cur[i]
        return self.cur[x]

    cdef Py_ssize_t _collect(self, Py_ssize_t s, long long i, long long j) noexcept nogil:
        """Transfers of step ``s`` that involve ``i`` or ``j`` and the slots they touch."""
        cdef Py_ssize_t x, q, L, r, ki = s * self.n + i, kj = s * self.n + j
        cdef long long a, b
        self.ne = 0
        for x in range(self.sptr[ki], self.sptr[ki + 1]):
            self._push(self.sidx[x])
        for x in range(self.rptr[ki], self.rptr[ki + 1]):
            self._push(self.ridx[x])
        for x in range(self.sptr[kj], self.sptr[kj + 1]):
            self._push(self.sidx[x])
        for x in range(self.rptr[kj], self.rptr[kj + 1]):
            self._push(self.ridx[x])
        if self.ne == 0:
            return 0
        self.ns = 0
        self.now += 1
        self._addslot(s, self.A)
        for q in range(self.ne):
            self.oa[q] = self._old(self.src[self.E[q]], i, j)
            self.ob[q] = self._old(self.dst[self.E[q]], i, j)
            self.na[q] = self.cur[self.src[self.E[q]]]
            self.nb[q] = self.cur[self.dst[self.E[q]]]
            for L in range(self.nlev):
                for r in range(2):
                    a = self.oa[q] if r == 0 else self.na[q]
                    b = self.ob[q] if r == 0 else self.nb[q]
                    if self.lab[L, a] != self.lab[L, b]:
                        self._addslot(s, (L * self.G + self.lab[L, a]) * 2)
                        self._addslot(s, (L * self.G + self.lab[L, b]) * 2 + 1)
        return self.ne

    cdef void _swap(self, long long i, long long j) noexcept nogil:
        cdef long long tmp = self.cur[i]
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp
        self.pos[self.cur[i]] = i
        self.pos[self.cur[j]] = j

    cdef double _step_delta(self, Py_ssize_t s) noexcept nogil:
        """Change of step ``s`` for the move recorded by ``_collect``."""
        cdef Py_ssize_t q, h, t, sl, gs, base = s * self.M
        cdef long long rem, add
        cdef double mx, v, before = self._root(s), after
        for h in range(self.ns):
            sl = self.S[h]
            gs = s * self.nslots + sl
            rem = 0
            add = 0
            mx = -INF
            for q in range(self.ne):
                if self._member(sl, self.oa[q], self.ob[q]):
                    rem += 1
                if self._member(sl, self.na[q], self.nb[q]):
                    add += 1
                    v = self._val(s, sl, self.na[q], self.nb[q])
                    if v > mx:
                        mx = v
            # sorted: the first survivor is the largest
            t = top_first_kept(&self.ti[gs, 0], self.tn[gs], &self.E[0], self.ne)
            if t < self.tn[gs]:
                if self.tv[gs, t] > mx:
                    mx = self.tv[gs, t]
            elif self.cnt[gs] - rem > 0:
                mx = self._scan(s, sl, False)
            self.saved[h] = self._term(s, sl, mx, self.cnt[gs] - rem + add)
        t = 0  # the largest untouched term: the first untouched one of the top list
        while t < self.ntop[s] and self.stamp[s * self.nslots + self.tops[base + t]] == self.now:
            t += 1
        if t < self.ntop[s] or self.ntop[s] == self.nslots:
            after = self.topv[base + t] if t < self.ntop[s] else -INF
            for h in range(self.ns):
                if self.saved[h] > after:
                    after = self.saved[h]
        else:
            for h in range(self.ns):
                v = self.saved[h]
                self.saved[h] = self.tree[s * 2 * self.P + self.P + self.S[h]]
                self._tset(s, self.S[h], v)
            after = self._root(s)
            for h in range(self.ns - 1, -1, -1):
                self._tset(s, self.S[h], self.saved[h])
        return after - before

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef Py_ssize_t s
        cdef double d = 0.0
        if i == j:
            return 0.0
        self._swap(i, j)
        for s in range(self.nsteps):
            if self._collect(s, i, j):
                d += self.reps[s] * self._step_delta(s)
        self._swap(i, j)
        return d

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef Py_ssize_t s, q, h, sl, gs
        if i == j:
            return
        self._swap(i, j)
        for s in range(self.nsteps):
            if not self._collect(s, i, j):
                continue
            for h in range(self.ns):
                sl = self.S[h]
                gs = s * self.nslots + sl
                # drop the changed transfers, keep the order
                self.tn[gs] = top_drop(&self.tv[gs, 0], &self.ti[gs, 0], self.tn[gs], &self.E[0],
                                       self.ne)
                for q in range(self.ne):
                    if self._member(sl, self.oa[q], self.ob[q]):
                        self.cnt[gs] -= 1
                for q in range(self.ne):
                    if self._member(sl, self.na[q], self.nb[q]):
                        self._insert(gs, self._val(s, sl, self.na[q], self.nb[q]), self.E[q])
                        self.cnt[gs] += 1
                if self.tn[gs] < K // 2 and self.tn[gs] < self.cnt[gs]:
                    self._scan(s, sl, True)
                self._tset(s, sl, self._term(s, sl, self.tv[gs, 0] if self.tn[gs] else -INF,
                                             self.cnt[gs]))
            self._find_top(s)

    cdef double _state_cost(self) noexcept nogil:
        cdef Py_ssize_t s
        cdef double t = 0.0
        for s in range(self.nsteps):
            t += self.reps[s] * self._root(s)
        return t

    # ------------------------------------------------------------ python API
    def cost(self, const long long[::1] order):
        """Modelled seconds of the schedule under ``order``."""
        return self.full.cost(order)

    def batch_cost(self, const long long[:, ::1] orders):
        """Costs of many orders, one per row."""
        return self.full.batch_cost(orders)

    def step_times(self, const long long[::1] order):
        """Duration of each distinct step under ``order``."""
        return self.full.step_times(order)

    def state_cost(self, const long long[::1] order):
        """Cost of ``order`` from the incremental state (for tests)."""
        with nogil:
            self._sync(order)
        return self._state_cost()
