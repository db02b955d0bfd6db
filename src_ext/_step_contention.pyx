# Swap deltas of a schedule with shared uplinks in O(levels log G) per step.
#
# When every transfer of a step carries the same c = frac * nbytes bytes, the
# step time is
#
#   max over transfers e of  lat_e + c / min(bw_e, up[L,g] / share[K[L,g]] ...)
#   = max( max_e (lat_e + c / bw_e),                                 slot A
#          max over (level L, group g, direction d) with K > 0 of
#              (max lat of the transfers leaving / entering g at L) + c / (up / share[K]) )
#
# where up is the uplink out of g (d = 0, transfers leaving g) or into g
# (d = 1, transfers entering g) and share[K] = K ** straggle: K for an even
# split, the model's own rule; with a measured straggle the model's share
# depends on both of a transfer's ends, and this kernel, on each end's count
# alone, is only the proxy that guides layout (rankopt.models.contention);
# beside m tenant flows that yield to ours, up is the capacity uplink * (1 + m)
# and the divisor share[K] + m
#
# (division and addition round monotonically, so the two forms are equal to
# the last bit). Each (step, L, g, d) is a "slot" holding a multiset of
# transfer values; a slot keeps its count K and its top values, sorted (every
# listed value >= every unlisted one; refilled by a scan of the group when it
# runs low). A step's slot terms sit in a tournament tree whose root is the
# step time, and its largest terms in a short sorted list with a bound on the
# terms left out of it (every listed term >= bound >= every unlisted one). A
# swap changes the few transfers of ranks i and j in a step and so O(levels)
# slots; applying it updates those slots' lists, tree leaves and the step's
# list in O(levels * (K + log slots)) per step, independent of n and of the
# number of groups (the step's list is rescanned only when it runs low). Rings
# (all steps alike) are one step with a repeat count. The NumPy twin is
# rankopt.models.network.reference_time.

from libc.math cimport INFINITY as INF
from _model_common cimport has_id
from rankopt.models._swap_eval cimport SwapEval

cdef extern from *:
    void __builtin_prefetch(const void *addr) nogil

cdef enum:
    K = 6  # top values kept per slot (a record of 128 bytes: two cache lines)


cdef struct Entry:
    double v  # a transfer's value in the slot
    long long e  # the transfer


cdef struct Slot:
    # one (step, level, group, direction) slot, in one place: what a move reads
    # of it (count, list length, stamp and the first entries) shares a cache line
    long long cnt  # transfers in the slot
    long long listed  # entries of ``top`` in use, sorted descending
    long long stamp  # the move that touched it last ...
    long long idx  # ... and its index among that move's slots
    Entry top[K]


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
    cdef const double[::1] share
    cdef const double[:, ::1] mo
    cdef const double[:, ::1] mi
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
    cdef const long long[::1] kptr  # rank-major: rank k's transfers by step,
    cdef const long long[:, ::1] kl  # rows (step, transfer, src, dst)
    cdef long long[::1] gstep  # the move's steps, and their transfers (gathered)
    cdef long long[::1] gsp
    cdef long long[:, ::1] gE  # rows (transfer, src, dst)
    cdef Py_ssize_t ngs
    cdef long long[::1] pos
    cdef object slot_buf  # owns the memory of ``slots``
    cdef Slot *slots  # per (step, slot), step-major
    cdef double[::1] tree
    cdef double[::1] topv
    cdef long long[::1] tops
    cdef long long[::1] ntop
    cdef double[::1] bound
    cdef long long now
    cdef int has_bw, nlev
    cdef Py_ssize_t nsteps, G, gbits, nslots, A, P, M
    cdef public object full
    cdef SwapEval fullev  # ``full`` when it is an evaluator (full costs in C)
    # scratch of one move in one step
    cdef long long[::1] E
    cdef long long[::1] oa
    cdef long long[::1] ob
    cdef long long[::1] na
    cdef long long[::1] nb
    cdef long long[::1] S
    cdef double[::1] saved
    cdef long long[::1] rem
    cdef long long[::1] add
    cdef double[::1] mxv
    cdef Py_ssize_t ne, ns

    def __init__(self, full, const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 const long long[:, ::1] labels, const double[:, ::1] uplink,
                 const double[:, ::1] uplink_in, const double[::1] share,
                 const double[:, ::1] tenant, const double[:, ::1] tenant_in,
                 const long long[:, ::1] gptr,
                 const long long[::1] gmem, const long long[::1] src, const long long[::1] dst,
                 const long long[::1] step_ptr, const double[::1] c, const double[::1] reps,
                 const long long[::1] sptr, const long long[::1] sidx,
                 const long long[::1] rptr, const long long[::1] ridx,
                 const long long[::1] kptr, const long long[:, ::1] klist, long long maxe):
        import numpy as np
        self.full = full
        self.fullev = full if isinstance(full, SwapEval) else None
        self.lat = lat
        self.bw = bw
        self.has_bw = has_bw
        self.lab = labels
        self.up = uplink
        self.upi = uplink_in
        self.share = share
        self.mo = tenant
        self.mi = tenant_in
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
        self.kptr = kptr
        self.kl = klist
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
        self.slot_buf = np.zeros(self.nsteps * self.nslots * sizeof(Slot) + 64, dtype=np.uint8)
        cdef size_t addr = self.slot_buf.ctypes.data
        self.slots = <Slot *>(addr + (-addr) % 64)  # rows on cache-line boundaries
        self.tree = np.full(self.nsteps * 2 * self.P, -INF)
        self.topv = np.zeros(self.nsteps * self.M, dtype=np.float64)
        self.tops = np.zeros(self.nsteps * self.M, dtype=np.int64)
        self.ntop = np.zeros(self.nsteps, dtype=np.int64)
        self.bound = np.full(self.nsteps, INF)
        self.gstep = np.zeros(self.nsteps, dtype=np.int64)
        self.gsp = np.zeros(self.nsteps + 1, dtype=np.int64)
        self.gE = np.zeros((max(self.nsteps * maxe, 1), 3), dtype=np.int64)
        self.E = np.zeros(maxe, dtype=np.int64)
        self.oa = np.zeros(maxe, dtype=np.int64)
        self.ob = np.zeros(maxe, dtype=np.int64)
        self.na = np.zeros(maxe, dtype=np.int64)
        self.nb = np.zeros(maxe, dtype=np.int64)
        self.S = np.zeros(ms, dtype=np.int64)
        self.saved = np.zeros(ms, dtype=np.float64)
        self.rem = np.zeros(ms, dtype=np.int64)
        self.add = np.zeros(ms, dtype=np.int64)
        self.mxv = np.zeros(ms, dtype=np.float64)
        self.now = 0

    # ------------------------------------------------------------ slot helpers
    cdef inline double _val(self, Py_ssize_t s, Py_ssize_t sl, long long a,
                            long long b) noexcept nogil:
        if sl == self.A:
            return self.lat[a, b] + self.c[s] / (self.bw[a, b] if self.has_bw else INF)
        return self.lat[a, b]

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
            return mx + self.c[s] / (self.upi[L, g] / (self.share[count] + self.mi[L, g]))
        return mx + self.c[s] / (self.up[L, g] / (self.share[count] + self.mo[L, g]))

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
        """The ``M`` largest slot terms of step ``s``, sorted, and the bound on the others."""
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
        self.bound[s] = self.topv[base + m - 1] if m < self.nslots else -INF

    cdef void _top_update(self, Py_ssize_t s) noexcept nogil:
        """Bring the step's list up to the slots of the move recorded by ``_collect``
        (their tree leaves already set): drop them, put back those whose new
        term is at least the bound, rescan the step when the list runs low."""
        cdef Py_ssize_t t, h, m = 0, base = s * self.M, tb = s * 2 * self.P + self.P
        cdef Py_ssize_t sb = s * self.nslots
        cdef double v
        for t in range(self.ntop[s]):
            if self.slots[sb + self.tops[base + t]].stamp != self.now:
                self.topv[base + m] = self.topv[base + t]
                self.tops[base + m] = self.tops[base + t]
                m += 1
        for h in range(self.ns):
            v = self.tree[tb + self.S[h]]
            if v == -INF or v < self.bound[s]:
                continue  # left out: below every listed term
            if m == self.M:
                if v <= self.topv[base + m - 1]:
                    self.bound[s] = v  # >= the old bound
                    continue
                m -= 1  # the last listed term leaves the list
                if self.topv[base + m] > self.bound[s]:
                    self.bound[s] = self.topv[base + m]
            t = m
            while t > 0 and self.topv[base + t - 1] < v:
                self.topv[base + t] = self.topv[base + t - 1]
                self.tops[base + t] = self.tops[base + t - 1]
                t -= 1
            self.topv[base + t] = v
            self.tops[base + t] = self.S[h]
            m += 1
        self.ntop[s] = m
        if 2 * m < self.M and self.bound[s] > -INF:
            self._find_top(s)

    cdef void _insert(self, Py_ssize_t gs, double v, long long e) noexcept nogil:
        """Put ``v`` (not yet counted in ``cnt``) in the sorted (descending) top
        list of global slot ``gs`` when the list stays its largest values."""
        cdef Slot *q = &self.slots[gs]
        cdef Py_ssize_t t, m = q.listed
        if m == K:
            if v <= q.top[K - 1].v:
                return
            m = K - 1
        elif q.listed < q.cnt and (m == 0 or v < q.top[m - 1].v):
            return  # the list is not every value: one below its last stays out
        t = m
        while t > 0 and q.top[t - 1].v < v:
            q.top[t] = q.top[t - 1]
            t -= 1
        q.top[t].v = v
        q.top[t].e = e
        q.listed = m + 1

    cdef void _drop(self, Py_ssize_t gs) noexcept nogil:
        """Remove the move's transfers (``E``) from the top list of global slot ``gs``,
        the order kept."""
        cdef Slot *q = &self.slots[gs]
        cdef Py_ssize_t t, k = 0
        for t in range(q.listed):
            if not has_id(&self.E[0], self.ne, q.top[t].e):
                q.top[k] = q.top[t]
                k += 1
        q.listed = k

    cdef double _scan(self, Py_ssize_t s, Py_ssize_t sl, bint keep) noexcept nogil:
        """Largest value of slot ``sl`` of step ``s`` under the current order."""
        cdef Py_ssize_t L, g, d, q, x, e, gs = s * self.nslots + sl
        cdef long long p, b, k
        cdef double mx = -INF, v
        if keep:
            self.slots[gs].listed = 0
            self.slots[gs].cnt = 0
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
            self.slots[gs].cnt += 1
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
            self.slots[k].listed = 0
            self.slots[k].cnt = 0
            self.slots[k].stamp = 0
        for s in range(self.nsteps):
            for e in range(self.ptr[s], self.ptr[s + 1]):  # flag the crossed slots
                a = self.cur[self.src[e]]
                b = self.cur[self.dst[e]]
                for L in range(self.nlev):
                    if self.lab[L, a] != self.lab[L, b]:
                        self.slots[s * self.nslots + (L * self.G + self.lab[L, a]) * 2].cnt = 1
                        self.slots[s * self.nslots + (L * self.G + self.lab[L, b]) * 2 + 1].cnt = 1
            for sl in range(self.nslots):
                gs = s * self.nslots + sl
                if sl == self.A or self.slots[gs].cnt:
                    mx = self._scan(s, sl, True)  # before reading the count it sets
                    self.tree[s * 2 * self.P + self.P + sl] = self._term(s, sl, mx,
                                                                         self.slots[gs].cnt)
            for k in range(self.P - 1, 0, -1):
                gs = s * 2 * self.P
                self.tree[gs + k] = self.tree[gs + 2 * k] \
                    if self.tree[gs + 2 * k] > self.tree[gs + 2 * k + 1] \
                    else self.tree[gs + 2 * k + 1]
            self._find_top(s)
        self.valid = True

    # ---------------------------------------------------------------- a move
    cdef inline Py_ssize_t _addslot(self, Py_ssize_t s, Py_ssize_t sl) noexcept nogil:
        """Index of slot ``sl`` among the move's slots in step ``s`` (added, tallies zero)."""
        cdef Py_ssize_t gs = s * self.nslots + sl, h
        if self.slots[gs].stamp == self.now:
            return self.slots[gs].idx
        h = self.ns
        self.slots[gs].stamp = self.now
        self.slots[gs].idx = h
        self.S[h] = sl
        self.rem[h] = 0
        self.add[h] = 0
        self.mxv[h] = -INF
        self.ns += 1
        return h

    cdef inline long long _old(self, long long x, long long i, long long j) noexcept nogil:
        """Process at new rank ``x`` before the swap of ``i``, ``j`` (``cur`` is swapped)."""
        if x == i:
            return self.cur[j]
        if x == j:
            return self.cur[i]
        return self.cur[x]

    cdef void _gather(self, long long i, long long j) noexcept nogil:
        """The steps in which ``i`` or ``j`` take part and their transfers (``gstep``,
        ``gsp``, ``gE``), from the two ranks' lists; with ``cur`` swapped, what
        the move will read (pair entries, uplink slots) is fetched ahead, in
        independent loads."""
        cdef Py_ssize_t pi = self.kptr[i], ei = self.kptr[i + 1]
        cdef Py_ssize_t pj = self.kptr[j], ej = self.kptr[j + 1], k = 0, q, st, t, L
        cdef long long s, e, a, b
        self.ngs = 0
        self.gsp[0] = 0
        while pi < ei or pj < ej:
            s = self.kl[pi, 0] if pi < ei else self.kl[pj, 0]
            if pj < ej and self.kl[pj, 0] < s:
                s = self.kl[pj, 0]
            st = k
            while pi < ei and self.kl[pi, 0] == s:
                self.gE[k, 0] = self.kl[pi, 1]
                self.gE[k, 1] = self.kl[pi, 2]
                self.gE[k, 2] = self.kl[pi, 3]
                k += 1
                pi += 1
            while pj < ej and self.kl[pj, 0] == s:
                e = self.kl[pj, 1]
                for q in range(st, k):
                    if self.gE[q, 0] == e:
                        break
                else:
                    self.gE[k, 0] = e
                    self.gE[k, 1] = self.kl[pj, 2]
                    self.gE[k, 2] = self.kl[pj, 3]
                    k += 1
                pj += 1
            self.gstep[self.ngs] = s
            self.ngs += 1
            self.gsp[self.ngs] = k
        for t in range(self.ngs):
            s = self.gstep[t]
            self._fetch_slot(s, self.A)
            for q in range(self.gsp[t], self.gsp[t + 1]):
                a = self.cur[self.gE[q, 1]]
                b = self.cur[self.gE[q, 2]]
                __builtin_prefetch(&self.lat[a, b])
                if self.has_bw:
                    __builtin_prefetch(&self.bw[a, b])
                for L in range(self.nlev):  # the uplink slots the new pair crosses
                    if self.lab[L, a] != self.lab[L, b]:
                        self._fetch_slot(s, (L * self.G + self.lab[L, a]) * 2)
                        self._fetch_slot(s, (L * self.G + self.lab[L, b]) * 2 + 1)
                a = self._old(self.gE[q, 1], i, j)
                b = self._old(self.gE[q, 2], i, j)
                for L in range(self.nlev):  # and the old one
                    if self.lab[L, a] != self.lab[L, b]:
                        self._fetch_slot(s, (L * self.G + self.lab[L, a]) * 2)
                        self._fetch_slot(s, (L * self.G + self.lab[L, b]) * 2 + 1)

    cdef inline void _fetch_slot(self, Py_ssize_t s, Py_ssize_t sl) noexcept nogil:
        """Fetch ahead what a move reads of slot ``sl`` of step ``s``."""
        cdef Py_ssize_t gs = s * self.nslots + sl
        __builtin_prefetch(&self.slots[gs])
        __builtin_prefetch(&self.tree[s * 2 * self.P + self.P + sl])

    cdef Py_ssize_t _collect(self, Py_ssize_t t, long long i, long long j) noexcept nogil:
        """Gathered step ``t``: its transfers, the slots they touch and, per slot,
        how many of them leave it (``rem``), join it (``add``) and the largest
        value joining (``mxv``)."""
        cdef Py_ssize_t x, q, L, h, s = self.gstep[t]
        cdef long long a, b
        cdef double v
        self.ne = 0
        self.ns = 0
        self.now += 1
        h = self._addslot(s, self.A)  # every transfer is in the pair-time slot
        for x in range(self.gsp[t], self.gsp[t + 1]):
            q = self.ne
            self.E[q] = self.gE[x, 0]
            a = self.cur[self.gE[x, 1]]
            b = self.cur[self.gE[x, 2]]
            self.na[q] = a
            self.nb[q] = b
            v = self._val(s, self.A, a, b)
            if v > self.mxv[h]:
                self.mxv[h] = v
            self.oa[q] = self._old(self.gE[x, 1], i, j)
            self.ob[q] = self._old(self.gE[x, 2], i, j)
            self.ne += 1
        self.rem[h] = self.ne
        self.add[h] = self.ne
        for q in range(self.ne):
            for L in range(self.nlev):
                a = self.oa[q]
                b = self.ob[q]
                if self.lab[L, a] != self.lab[L, b]:
                    self.rem[self._addslot(s, (L * self.G + self.lab[L, a]) * 2)] += 1
                    self.rem[self._addslot(s, (L * self.G + self.lab[L, b]) * 2 + 1)] += 1
                a = self.na[q]
                b = self.nb[q]
                if self.lab[L, a] != self.lab[L, b]:
                    v = self.lat[a, b]
                    h = self._addslot(s, (L * self.G + self.lab[L, a]) * 2)
                    self.add[h] += 1
                    if v > self.mxv[h]:
                        self.mxv[h] = v
                    h = self._addslot(s, (L * self.G + self.lab[L, b]) * 2 + 1)
                    self.add[h] += 1
                    if v > self.mxv[h]:
                        self.mxv[h] = v
        return self.ne

    cdef void _swap(self, long long i, long long j) noexcept nogil:
        cdef long long tmp = self.cur[i]
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp
        self.pos[self.cur[i]] = i
        self.pos[self.cur[j]] = j

    cdef double _step_delta(self, Py_ssize_t s) noexcept nogil:
        """Change of step ``s`` for the move recorded by ``_collect``."""
        cdef Py_ssize_t h, t, sl, gs, base = s * self.M
        cdef double mx, v, before = self._root(s), after
        cdef Slot *q
        for h in range(self.ns):
            sl = self.S[h]
            gs = s * self.nslots + sl
            mx = self.mxv[h]
            t = 0  # sorted: the first survivor is the largest
            q = &self.slots[gs]
            while t < q.listed and has_id(&self.E[0], self.ne, q.top[t].e):
                t += 1
            if t < q.listed:
                if q.top[t].v > mx:
                    mx = q.top[t].v
            elif q.cnt - self.rem[h] > 0:
                mx = self._scan(s, sl, False)
            self.saved[h] = self._term(s, sl, mx, q.cnt - self.rem[h] + self.add[h])
            if sl != self.A:  # tie-break: squared uplink terms, old and new
                v = self.tree[s * 2 * self.P + self.P + sl]
                if v > -INF:
                    self.tie -= self.reps[s] * v * v
                if self.saved[h] > -INF:
                    self.tie += self.reps[s] * self.saved[h] * self.saved[h]
        t = 0  # the largest untouched term: the first untouched one of the top list
        gs = s * self.nslots
        while t < self.ntop[s] and self.slots[gs + self.tops[base + t]].stamp == self.now:
            t += 1
        if t < self.ntop[s] or self.bound[s] == -INF:
            after = self.topv[base + t] if t < self.ntop[s] else -INF
            for h in range(self.ns):
                if self.saved[h] > after:
                    after = self.saved[h]
        else:  # every listed term moves: the tree answers
            for h in range(self.ns):
                v = self.saved[h]
                self.saved[h] = self.tree[s * 2 * self.P + self.P + self.S[h]]
                self._tset(s, self.S[h], v)
            after = self._root(s)
            for h in range(self.ns - 1, -1, -1):
                self._tset(s, self.S[h], self.saved[h])
        return after - before

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef Py_ssize_t s, t
        cdef double d = 0.0
        self.tie = 0.0
        if i == j:
            return 0.0
        self._swap(i, j)
        self._gather(i, j)
        for t in range(self.ngs):
            self._collect(t, i, j)
            s = self.gstep[t]
            d += self.reps[s] * self._step_delta(s)
        self._swap(i, j)
        return d

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef Py_ssize_t s, q, h, sl, gs, L, sb, t
        cdef long long a, b
        if i == j:
            return
        self._swap(i, j)
        self._gather(i, j)
        for t in range(self.ngs):
            self._collect(t, i, j)
            s = self.gstep[t]
            sb = s * self.nslots
            for h in range(self.ns):  # drop the changed transfers, keep the order
                gs = sb + self.S[h]
                self._drop(gs)
                self.slots[gs].cnt -= self.rem[h]
            for q in range(self.ne):  # and put them back where they now are
                a = self.na[q]
                b = self.nb[q]
                gs = sb + self.A
                self._insert(gs, self._val(s, self.A, a, b), self.E[q])
                self.slots[gs].cnt += 1
                for L in range(self.nlev):
                    if self.lab[L, a] != self.lab[L, b]:
                        gs = sb + (L * self.G + self.lab[L, a]) * 2
                        self._insert(gs, self.lat[a, b], self.E[q])
                        self.slots[gs].cnt += 1
                        gs = sb + (L * self.G + self.lab[L, b]) * 2 + 1
                        self._insert(gs, self.lat[a, b], self.E[q])
                        self.slots[gs].cnt += 1
            for h in range(self.ns):
                sl = self.S[h]
                gs = sb + sl
                if self.slots[gs].listed < K // 2 and self.slots[gs].listed < self.slots[gs].cnt:
                    self._scan(s, sl, True)
                self._tset(s, sl, self._term(s, sl, self.slots[gs].top[0].v
                                             if self.slots[gs].listed else -INF,
                                             self.slots[gs].cnt))
            self._top_update(s)

    cdef double _full(self, const long long[::1] o) noexcept nogil:
        if self.fullev is not None:
            return self.fullev._full(o)
        self._sync(o)
        return self._state_cost()

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
