# Compiled evaluation of a schedule under a rank order (alpha-beta, step
# synchronous, shared uplinks), swap deltas that only revisit the steps in
# which the two swapped ranks take part, and a first-improvement swap search.
#
# Transfers are stored flat (src, dst, frac) with step_ptr / repeat, exactly as
# rankopt.models.schedule.Schedule; the NumPy twin is
# rankopt.models.network.reference_time.

from libc.math cimport INFINITY as INF
from libc.string cimport memcpy
from _model_common cimport has_id, top_drop, top_insert
from rankopt.models._swap_eval cimport SwapEval

cdef enum:
    K = 8  # largest transfer times kept per step (no uplinks)


cdef class StepEval(SwapEval):
    """Evaluator of one schedule on one network; caches the last order seen.

    ``swap_delta(order, i, j)`` first brings its cache up to ``order``
    (nothing to do when unchanged, the touched steps when ``order`` differs
    from the cached one by one swap, else a rebuild), then revisits only the
    steps in which new ranks ``i`` or ``j`` take part. Without uplinks each
    step keeps its ``K`` largest transfer times, sorted: a delta reads the
    largest one the swap leaves in place and an applied swap updates the
    list, in ``O(K)`` per touched step (a step is rescanned only when its
    list runs low), so deltas stay cheap after accepted swaps.
    ``cost``, ``batch_cost``, ``swap_delta(s)`` and ``search`` come from
    :class:`SwapEval`.
    """

    cdef const double[:, ::1] lat
    cdef const double[:, ::1] bw
    cdef const long long[:, ::1] lab
    cdef const double[:, ::1] up
    cdef const double[:, ::1] upi
    cdef const double[::1] share
    cdef const double[::1] crowd
    cdef bint even  # straggle 1: every crowd entry 1, the uplinks' shares per group
    cdef const double[:, ::1] mo
    cdef const double[:, ::1] mi
    cdef const long long[::1] src
    cdef const long long[::1] dst
    cdef const double[::1] frac
    cdef const long long[::1] ptr
    cdef const long long[::1] rep
    cdef const long long[::1] tstep
    cdef const long long[::1] rptr
    cdef const long long[::1] rtr
    cdef long long[:, ::1] cout
    cdef long long[:, ::1] cin
    cdef double[:, ::1] capo
    cdef double[:, ::1] capi
    cdef long long[::1] tout
    cdef long long[::1] tin
    cdef Py_ssize_t ntout, ntin
    cdef double[::1] tt
    cdef double[::1] tl
    cdef double[::1] tr
    cdef double[::1] st
    cdef unsigned char[::1] mark
    cdef long long[::1] buf
    cdef double[:, ::1] sv  # per step: largest transfer times, sorted, and their ids
    cdef long long[:, ::1] si
    cdef long long[::1] sn
    cdef double nbytes
    cdef int has_bw, has_rate, nlev
    cdef Py_ssize_t nsteps

    def __init__(self, const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 double nbytes, bint has_rate, const long long[:, ::1] labels,
                 const double[:, ::1] uplink, const double[:, ::1] uplink_in,
                 const double[::1] share, const double[::1] crowd,
                 const double[:, ::1] tenant,
                 const double[:, ::1] tenant_in, const long long[::1] src,
                 const long long[::1] dst, const double[::1] frac,
                 const long long[::1] step_ptr, const long long[::1] repeat,
                 const long long[::1] tstep, const long long[::1] rptr,
                 const long long[::1] rtr, long long bufsize):
        import numpy as np
        self.lat = lat
        self.bw = bw
        self.has_bw = has_bw
        self.nbytes = nbytes
        self.has_rate = has_rate
        self.lab = labels
        self.up = uplink
        self.upi = uplink_in
        self.share = share
        self.crowd = crowd
        self.even = bool(np.all(np.asarray(crowd) == 1.0))
        self.mo = tenant
        self.mi = tenant_in
        self.nlev = labels.shape[0]
        self.src = src
        self.dst = dst
        self.frac = frac
        self.ptr = step_ptr
        self.rep = repeat
        self.tstep = tstep
        self.rptr = rptr
        self.rtr = rtr
        self._init_cache(lat.shape[0])
        self.nsteps = repeat.shape[0]
        self.cout = np.zeros((max(self.nlev, 1), uplink.shape[1]), dtype=np.int64)
        self.cin = np.zeros((max(self.nlev, 1), uplink.shape[1]), dtype=np.int64)
        self.capo = np.zeros((max(self.nlev, 1), uplink.shape[1]), dtype=np.float64)
        self.capi = np.zeros((max(self.nlev, 1), uplink.shape[1]), dtype=np.float64)
        self.tout = np.zeros(max(self.nlev, 1) * uplink.shape[1], dtype=np.int64)
        self.tin = np.zeros(max(self.nlev, 1) * uplink.shape[1], dtype=np.int64)
        self.tt = np.zeros(src.shape[0], dtype=np.float64)
        self.tl = np.zeros(src.shape[0], dtype=np.float64)
        self.tr = np.zeros(src.shape[0], dtype=np.float64)
        self.st = np.zeros(self.nsteps, dtype=np.float64)
        self.mark = np.zeros(src.shape[0], dtype=np.uint8)
        self.buf = np.zeros(max(bufsize, 1), dtype=np.int64)
        self.sv = np.zeros((self.nsteps, K), dtype=np.float64)
        self.si = np.zeros((self.nsteps, K), dtype=np.int64)
        self.sn = np.zeros(self.nsteps, dtype=np.int64)

    # ---------------------------------------------------------------- core
    cdef void _count(self, const long long[::1] o, Py_ssize_t s) noexcept nogil:
        """Uplink transfer counts of step ``s`` and each used uplink's share
        ``up / (share[K] + m)`` (out of the group) or ``upi / (share[K] + m)``
        (into it; ``share[K]`` is ``K`` for an even split, ``m`` the tenant
        flows that yield and ``up`` the capacity beside them, ``uplink * (1 +
        m)``; the shares only with an even split, see ``_with_rate``);
        :meth:`_uncount` clears them."""
        cdef Py_ssize_t e, L, q, G = self.up.shape[1]
        cdef long long a, b, f
        cdef long long *co = &self.cout[0, 0]
        cdef long long *ci = &self.cin[0, 0]
        cdef const double *up = &self.up[0, 0]
        cdef const double *upi = &self.upi[0, 0]
        cdef const double *mo = &self.mo[0, 0]
        cdef const double *mi = &self.mi[0, 0]
        cdef double *po = &self.capo[0, 0]
        cdef double *pi = &self.capi[0, 0]
        self.ntout = 0
        self.ntin = 0
        for e in range(self.ptr[s], self.ptr[s + 1]):
            a = o[self.src[e]]
            b = o[self.dst[e]]
            for L in range(self.nlev):
                if self.lab[L, a] != self.lab[L, b]:
                    f = L * G + self.lab[L, a]
                    if co[f] == 0:
                        self.tout[self.ntout] = f
                        self.ntout += 1
                    co[f] += 1
                    f = L * G + self.lab[L, b]
                    if ci[f] == 0:
                        self.tin[self.ntin] = f
                        self.ntin += 1
                    ci[f] += 1
        if not self.even:  # each transfer's share depends on both its ends
            return
        for q in range(self.ntout):
            f = self.tout[q]
            po[f] = up[f] / (self.share[co[f]] + mo[f])
        for q in range(self.ntin):
            f = self.tin[q]
            pi[f] = upi[f] / (self.share[ci[f]] + mi[f])

    cdef void _uncount(self) noexcept nogil:
        cdef Py_ssize_t q
        cdef long long *co = &self.cout[0, 0]
        cdef long long *ci = &self.cin[0, 0]
        for q in range(self.ntout):
            co[self.tout[q]] = 0
        for q in range(self.ntin):
            ci[self.tin[q]] = 0

    cdef inline double _time(self, const long long[::1] o, Py_ssize_t e) noexcept nogil:
        cdef long long a = o[self.src[e]], b = o[self.dst[e]]
        if not self.has_rate:
            return self.lat[a, b]
        return self._with_rate(a, b, e, self.lat[a, b], self.bw[a, b] if self.has_bw else INF)

    cdef inline double _with_rate(self, long long a, long long b, Py_ssize_t e, double t,
                                  double rate) noexcept nogil:
        """``t + bytes / rate`` with ``rate`` capped by the shared uplinks.

        With an even split each used uplink's share was set by ``_count``;
        else the transfer's own share: its counts ``K`` times ``crowd[c]``,
        ``c = min(K_out, K_in)`` the transfers it is crowded with at both
        ends (counts are set while ``_count``'s step is being visited)."""
        cdef long long ga, gb, ko, ki
        cdef double r, x
        cdef Py_ssize_t L
        if not self.has_rate:
            return t
        for L in range(self.nlev):
            ga = self.lab[L, a]
            gb = self.lab[L, b]
            if ga != gb:
                if self.even:
                    r = self.capo[L, ga]
                    if r < rate:
                        rate = r
                    r = self.capi[L, gb]
                    if r < rate:
                        rate = r
                    continue
                ko = self.cout[L, ga]
                ki = self.cin[L, gb]
                x = self.crowd[ko if ko < ki else ki]
                r = self.up[L, ga] / (ko * x + self.mo[L, ga])
                if r < rate:
                    rate = r
                r = self.upi[L, gb] / (ki * x + self.mi[L, gb])
                if r < rate:
                    rate = r
        return t + self.frac[e] * self.nbytes / rate

    cdef double _step(self, const long long[::1] o, Py_ssize_t s, bint store) noexcept nogil:
        cdef Py_ssize_t e
        cdef double m = -1.0, t
        if self.nlev:
            self._count(o, s)
        for e in range(self.ptr[s], self.ptr[s + 1]):
            t = self._time(o, e)
            if store:
                self.tt[e] = t
                if self.nlev:  # the pair's latency and rate, reused by _step_cached
                    self.tl[e] = self.lat[o[self.src[e]], o[self.dst[e]]]
                    self.tr[e] = (self.bw[o[self.src[e]], o[self.dst[e]]] if self.has_bw else INF)
            if t > m:
                m = t
        if self.nlev:
            self._uncount()
        if m < 0:
            m = 0.0
        if store:
            self.st[s] = m
        return m

    cdef double _step_cached(self, Py_ssize_t s) noexcept nogil:
        """Step time under ``cur`` (after a trial swap); transfers not marked reuse
        their cached pair latency and bandwidth, so only uplink counts are redone."""
        cdef Py_ssize_t e
        cdef double m = 0.0, t
        self._count(self.cur, s)
        for e in range(self.ptr[s], self.ptr[s + 1]):
            if self.mark[e]:
                t = self._time(self.cur, e)
            else:
                t = self._with_rate(self.cur[self.src[e]], self.cur[self.dst[e]], e,
                                    self.tl[e], self.tr[e])
            if t > m:
                m = t
        self._uncount()
        return m

    cdef double _full(self, const long long[::1] o) noexcept nogil:
        cdef double total = 0.0
        cdef Py_ssize_t s
        for s in range(self.nsteps):
            total += self.rep[s] * self._step(o, s, False)
        return total

    cdef void _refill(self, Py_ssize_t s) noexcept nogil:
        """The step's list of largest transfer times, from the cached times."""
        cdef Py_ssize_t e
        self.sn[s] = 0
        for e in range(self.ptr[s], self.ptr[s + 1]):
            top_insert(&self.sv[s, 0], &self.si[s, 0], &self.sn[s], K, self.tt[e], e,
                       self.sn[s] >= e - self.ptr[s])

    cdef void _rebuild(self, const long long[::1] o) noexcept nogil:
        cdef Py_ssize_t s
        memcpy(&self.cur[0], &o[0], self.n * sizeof(long long))
        for s in range(self.nsteps):
            self._step(self.cur, s, True)
            if not self.nlev:
                self._refill(s)
        self.valid = True

    cdef Py_ssize_t _collect(self, long long i, long long j, Py_ssize_t *pi,
                             Py_ssize_t *pj, long long *step) noexcept nogil:
        """Next step in which rank i or j takes part: its transfers into buf."""
        cdef Py_ssize_t ei = self.rptr[i + 1], ej = self.rptr[j + 1], k = 0
        cdef long long s, e
        if pi[0] >= ei and pj[0] >= ej:
            return -1
        s = self.tstep[self.rtr[pi[0]]] if pi[0] < ei else self.tstep[self.rtr[pj[0]]]
        if pj[0] < ej and self.tstep[self.rtr[pj[0]]] < s:
            s = self.tstep[self.rtr[pj[0]]]
        while pi[0] < ei and self.tstep[self.rtr[pi[0]]] == s:
            self.buf[k] = self.rtr[pi[0]]
            k += 1
            pi[0] += 1
        while pj[0] < ej and self.tstep[self.rtr[pj[0]]] == s:
            e = self.rtr[pj[0]]
            if not has_id(&self.buf[0], k, e):
                self.buf[k] = e
                k += 1
            pj[0] += 1
        step[0] = s
        return k

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef long long tmp = self.cur[i], s, e
        cdef Py_ssize_t pi = self.rptr[i], pj = self.rptr[j], k, q, rest
        cdef double t
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp
        while True:
            k = self._collect(i, j, &pi, &pj, &s)
            if k < 0:
                break
            if self.nlev:  # uplink counts change: the step is recomputed
                self._step(self.cur, s, True)
                continue
            # drop the moved transfers from the step's list, put back their new times
            self.sn[s] = top_drop(&self.sv[s, 0], &self.si[s, 0], self.sn[s], &self.buf[0], k)
            rest = self.ptr[s + 1] - self.ptr[s] - k
            for q in range(k):
                e = self.buf[q]
                t = self._time(self.cur, e)
                self.tt[e] = t
                top_insert(&self.sv[s, 0], &self.si[s, 0], &self.sn[s], K, t, e,
                           self.sn[s] >= rest + q)
            if 2 * self.sn[s] < K and self.sn[s] < self.ptr[s + 1] - self.ptr[s]:
                self._refill(s)
            self.st[s] = self.sv[s, 0] if self.sn[s] and self.sv[s, 0] > 0.0 else 0.0

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef long long a = self.cur[i], b = self.cur[j], s, e
        cdef Py_ssize_t pi = self.rptr[i], pj = self.rptr[j], k, q
        cdef double d = 0.0, m, t
        if i == j:
            return 0.0
        self.cur[i] = b
        self.cur[j] = a
        while True:
            k = self._collect(i, j, &pi, &pj, &s)
            if k < 0:
                break
            if self.nlev:  # uplink counts of the step may change: recompute it
                for q in range(k):
                    self.mark[self.buf[q]] = 1
                m = self._step_cached(s)
                for q in range(k):
                    self.mark[self.buf[q]] = 0
            else:
                m = 0.0
                for q in range(k):
                    t = self._time(self.cur, self.buf[q])
                    if t > m:
                        m = t
                q = 0  # the largest time the swap leaves in place: first untouched listed
                while q < self.sn[s] and has_id(&self.buf[0], k, self.si[s, q]):
                    q += 1
                if q < self.sn[s]:
                    if self.sv[s, q] > m:
                        m = self.sv[s, q]
                elif self.sn[s] < self.ptr[s + 1] - self.ptr[s]:  # list ran out: scan
                    for q in range(k):
                        self.mark[self.buf[q]] = 1
                    for e in range(self.ptr[s], self.ptr[s + 1]):
                        if not self.mark[e] and self.tt[e] > m:
                            m = self.tt[e]
                    for q in range(k):
                        self.mark[self.buf[q]] = 0
            d += self.rep[s] * (m - self.st[s])
        self.cur[i] = a
        self.cur[j] = b
        return d

    # ------------------------------------------------------------ python API
    @property
    def incremental(self):
        """Without uplinks: with them, a touched step's uplink counts are recounted."""
        return self.nlev == 0

    def step_times(self, const long long[::1] order):
        """Duration of each distinct step under ``order``."""
        import numpy as np
        with nogil:
            self._sync(order)
        return np.asarray(self.st).copy()


def chain_cost(const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw, double c_full,
               double c_last, const long long[::1] order, long long nseg):
    """Pipelined chain broadcast under ``order`` in ``O(n + segments)``.

    At step ``t`` link ``k`` (new rank ``k`` -> ``k + 1``) carries segment
    ``t - k`` when ``0 <= t - k < nseg``: the active links form a window that
    slides right, so the step maxima come from a monotonic deque. Every
    segment takes ``c_full`` bytes but the last, ``c_last``.
    """
    import numpy as np
    cdef Py_ssize_t n = order.shape[0], nl = n - 1, k, t, head = 0, tail = 0, nxt = 0
    cdef Py_ssize_t hi, lo1, last
    cdef long long a, b
    cdef double r, m, total = 0.0
    l1_np = np.empty(nl, dtype=np.float64)
    l2_np = np.empty(nl, dtype=np.float64)
    dq_np = np.empty(nl, dtype=np.int64)
    cdef double[::1] l1 = l1_np
    cdef double[::1] l2 = l2_np
    cdef long long[::1] dq = dq_np
    with nogil:
        for k in range(nl):
            a = order[k]
            b = order[k + 1]
            r = bw[a, b] if has_bw else INF
            l1[k] = lat[a, b] + c_full / r
            l2[k] = lat[a, b] + c_last / r
        for t in range(n - 2 + nseg):
            hi = t if t < n - 2 else n - 2
            lo1 = t - nseg + 2 if t >= nseg - 1 else 0  # the last segment's link is apart
            while nxt <= hi:
                while tail > head and l1[dq[tail - 1]] <= l1[nxt]:
                    tail -= 1
                dq[tail] = nxt
                tail += 1
                nxt += 1
            while head < tail and dq[head] < lo1:
                head += 1
            m = l1[dq[head]] if head < tail else 0.0
            last = t - nseg + 1
            if 0 <= last <= n - 2 and l2[last] > m:
                m = l2[last]
            total += m
    return total
