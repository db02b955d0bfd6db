# Compiled twin of rankopt.models.flow.flow_time: a schedule run as eager
# flows (a transfer starts once the transfers into its sender from earlier
# steps have ended), rates max-min fair under pair, process-link and uplink
# capacities, events at every start and end.
#
# Constraints are numbered: transfer e's pair is e; process p's outgoing link
# ne + p, its incoming link ne + n + p; then, per level and group, the uplink
# out of the group and the one into it (ne + 2n + 2 * (lev * G + g) + 0 / 1),
# of capacity uplink[lev, g] and uplink_in[lev, g].
# A process link that can carry only one flow (its new rank sends, or
# receives, one transfer in the schedule) never binds and is left out; the
# uplink of a group of one process carries the same flows as that process's
# link and is folded into it (into the pair when the link is left out), with
# bandwidth. Neither changes a rate. The transfers waiting for their start
# are kept in a list of their own.

from libc.math cimport INFINITY as INF

from _heap cimport heap_pop, heap_push

import numpy as np

cdef double TIE = 1e-12


cdef inline double fold(double[::1] cap, long long x, double pc, double u) noexcept nogil:
    """Fold the rate ``u`` into constraint ``x`` when there is one, else into the pair's ``pc``.

    Returns the pair's rate.
    """
    if x >= 0:
        if u < cap[x]:
            cap[x] = u
        return pc
    return u if u < pc else pc


cdef class FlowEval:
    """The flow model of one schedule on one network; ``cost(order)`` runs it.

    Built once per model: every scratch buffer is allocated here, so a run
    allocates nothing.
    """

    cdef const double[:, ::1] lat
    cdef const double[:, ::1] bw
    cdef const double[::1] capout
    cdef const double[::1] capin
    cdef const long long[:, ::1] labels
    cdef const double[:, ::1] uplink
    cdef const double[:, ::1] uplink_in
    cdef const long long[::1] src
    cdef const long long[::1] dst
    cdef const double[::1] frac
    cdef const long long[::1] dep_count
    cdef const long long[::1] dnt_ptr
    cdef const long long[::1] dnt_idx
    cdef long long[:, ::1] cons
    cdef long long[::1] ncons
    cdef double[::1] cap
    cdef double[::1] left_c
    cdef long long[::1] count
    cdef long long[::1] touched
    cdef unsigned char[::1] mark
    cdef unsigned char[::1] live
    cdef double[::1] rate
    cdef double[::1] left
    cdef double[::1] elat
    cdef double[::1] start
    cdef double[::1] end
    cdef long long[::1] wait
    cdef unsigned char[::1] status
    cdef long long[::1] mv
    cdef long long[::1] due
    cdef unsigned char[::1] out_shared
    cdef unsigned char[::1] in_shared
    cdef unsigned char[:, ::1] alone
    cdef long long[::1] pos
    cdef long long[::1] mptr
    cdef long long[::1] fill
    cdef long long[::1] mem
    cdef long long[::1] stamp
    cdef double[::1] hkey
    cdef long long[::1] hc
    cdef long long[::1] hs
    cdef double nbytes
    cdef bint has_bw
    cdef Py_ssize_t n, ne, nlev, G

    def __init__(self, const double[:, ::1] lat, const double[:, ::1] bw, bint has_bw,
                 const double[::1] capout, const double[::1] capin,
                 double nbytes, bint contention,
                 const long long[:, ::1] labels, const double[:, ::1] uplink,
                 const double[:, ::1] uplink_in, const long long[::1] src,
                 const long long[::1] dst, const double[::1] frac,
                 const long long[::1] dep_count, const long long[::1] dnt_ptr,
                 const long long[::1] dnt_idx):
        self.lat = lat
        self.bw = bw
        self.has_bw = has_bw
        self.capout = capout
        self.capin = capin
        self.nbytes = nbytes
        self.labels = labels
        self.uplink = uplink
        self.uplink_in = uplink_in
        self.src = src
        self.dst = dst
        self.frac = frac
        self.dep_count = dep_count
        self.dnt_ptr = dnt_ptr
        self.dnt_idx = dnt_idx
        self.n = lat.shape[0]
        self.ne = src.shape[0]
        self.nlev = labels.shape[0] if contention else 0
        self.G = uplink.shape[1]
        cdef Py_ssize_t m = max(self.ne, 1)
        cdef Py_ssize_t ncap = self.ne + 2 * self.n + 2 * self.nlev * self.G
        self.cons = np.zeros((m, 3 + 2 * self.nlev), dtype=np.int64)
        self.ncons = np.zeros(m, dtype=np.int64)
        self.cap = np.zeros(ncap)
        self.left_c = np.zeros(ncap)
        self.count = np.zeros(ncap, dtype=np.int64)
        self.touched = np.zeros(ncap, dtype=np.int64)
        self.mark = np.zeros(ncap, dtype=np.uint8)
        self.live = np.zeros(m, dtype=np.uint8)
        self.rate = np.zeros(m)
        self.left = np.zeros(m)
        self.elat = np.zeros(m)
        self.start = np.zeros(m)
        self.end = np.zeros(m)
        self.wait = np.zeros(m, dtype=np.int64)
        self.status = np.zeros(m, dtype=np.uint8)  # 0 waiting, 1 due, 2 moving, 3 done
        self.mv = np.zeros(m, dtype=np.int64)
        self.due = np.zeros(m, dtype=np.int64)
        # A process link carries one flow at a time when its new rank sends (receives)
        # one transfer in the whole schedule: its capacity, the fastest pair rate, is
        # then never below the flow's pair rate, so it never binds and is left out.
        self.out_shared = (np.bincount(np.asarray(src), minlength=self.n) > 1).astype(np.uint8)
        self.in_shared = (np.bincount(np.asarray(dst), minlength=self.n) > 1).astype(np.uint8)
        # A group of one process: its uplink carries exactly that process's flows out
        # (in), the same flows as the process's link, so the two are one constraint
        # whose capacity is the smaller (with bandwidth; one flow: its pair's).
        alone = np.zeros((max(self.nlev, 1), self.G), dtype=np.uint8)
        for lv in range(self.nlev):
            alone[lv] = np.bincount(np.asarray(labels[lv]), minlength=self.G) == 1
        self.alone = alone
        cdef Py_ssize_t mcons = 3 + 2 * self.nlev
        self.pos = np.zeros(ncap, dtype=np.int64)
        self.mptr = np.zeros(ncap + 1, dtype=np.int64)
        self.fill = np.zeros(ncap, dtype=np.int64)
        self.mem = np.zeros(m * mcons, dtype=np.int64)
        self.stamp = np.zeros(ncap, dtype=np.int64)
        self.hkey = np.zeros(ncap)
        self.hc = np.zeros(ncap, dtype=np.int64)
        self.hs = np.zeros(ncap, dtype=np.int64)

    cdef void fair_rates(self, Py_ssize_t nm) noexcept nogil:
        """Max-min fair rates of the moving flows mv[:nm] (progressive filling).

        The constraint with the smallest share (capacity left / flows not yet
        frozen) fills first. Shares only grow as flows freeze, so a heap holds
        one entry per constraint: an entry whose constraint has changed since
        (its stamp) goes back in with its current share when it reaches the top.
        """
        cdef Py_ssize_t i, j, k, p, nt = 0, nlive = nm, hn = 0
        cdef long long f, c, c2
        cdef double level
        for i in range(nm):
            f = self.mv[i]
            self.live[f] = 1
            for j in range(self.ncons[f]):
                c = self.cons[f, j]
                if not self.mark[c]:
                    self.mark[c] = 1
                    self.pos[c] = nt
                    self.touched[nt] = c
                    nt += 1
                    self.left_c[c] = self.cap[c]
                    self.count[c] = 0
                self.count[c] += 1
        self.mptr[0] = 0
        for p in range(nt):
            self.mptr[p + 1] = self.mptr[p] + self.count[self.touched[p]]
            self.fill[p] = self.mptr[p]
        for i in range(nm):
            f = self.mv[i]
            for j in range(self.ncons[f]):
                p = self.pos[self.cons[f, j]]
                self.mem[self.fill[p]] = f
                self.fill[p] += 1
        for p in range(nt):
            c = self.touched[p]
            self.stamp[c] = 0
            if self.left_c[c] < INF:
                heap_push(&self.hkey[0], &self.hc[0], &self.hs[0], &hn,
                          self.left_c[c] / self.count[c], c, 0)
        while nlive > 0 and hn > 0:
            c = self.hc[0]
            level = self.hkey[0]
            k = self.hs[0]
            heap_pop(&self.hkey[0], &self.hc[0], &self.hs[0], &hn)
            if self.count[c] == 0:
                continue
            if k != self.stamp[c]:  # changed since pushed: shares only grow, so put it back
                heap_push(&self.hkey[0], &self.hc[0], &self.hs[0], &hn,
                          self.left_c[c] / self.count[c], c, self.stamp[c])
                continue
            p = self.pos[c]
            for k in range(self.mptr[p], self.mptr[p + 1]):
                f = self.mem[k]
                if not self.live[f]:
                    continue
                self.rate[f] = level
                self.live[f] = 0
                nlive -= 1
                for j in range(self.ncons[f]):
                    c2 = self.cons[f, j]
                    if self.left_c[c2] > level:
                        self.left_c[c2] = self.left_c[c2] - level
                    else:
                        self.left_c[c2] = 0.0
                    self.count[c2] -= 1
                    self.stamp[c2] += 1
        for i in range(nm):  # nothing limits the rest
            f = self.mv[i]
            if self.live[f]:
                self.rate[f] = INF
                self.live[f] = 0
        for p in range(nt):
            self.mark[self.touched[p]] = 0

    def cost(self, const long long[::1] order):
        """Seconds until the last transfer ends under ``order`` (see rankopt.models.flow)."""
        cdef double t
        with nogil:
            t = self._run(order)
        return t

    cdef double _run(self, const long long[::1] order) noexcept nogil:
        cdef Py_ssize_t n = self.n, ne = self.ne, G = self.G
        cdef Py_ssize_t e, lev, i, j, k, nm = 0, ndone = 0, nd = 0, m0
        cdef long long a, b, ga, gb, x, xo = -1, xi = -1
        cdef double now = 0.0, finish = 0.0, t_end, t_start, nxt, dt, tol, pc = 0.0
        cdef long long[:, ::1] cons = self.cons
        cdef double[::1] cap = self.cap
        cdef double[::1] left = self.left
        cdef double[::1] rate = self.rate
        cdef double[::1] start = self.start
        cdef double[::1] end = self.end
        cdef double[::1] elat = self.elat
        cdef long long[::1] wait = self.wait
        cdef unsigned char[::1] status = self.status
        cdef long long[::1] mv = self.mv
        cdef long long[::1] due = self.due
        if ne == 0:
            return 0.0
        for e in range(ne):
            a = order[self.src[e]]
            b = order[self.dst[e]]
            elat[e] = self.lat[a, b]
            left[e] = self.frac[e] * self.nbytes
            k = 0
            if self.has_bw:  # the pair, then the process links that can bind
                pc = self.bw[a, b]
                cons[e, 0] = e
                k = 1
                xo = ne + a if self.out_shared[self.src[e]] else -1
                xi = ne + n + b if self.in_shared[self.dst[e]] else -1
                if xo >= 0:
                    cons[e, k] = xo
                    cap[xo] = self.capout[a]
                    k += 1
                if xi >= 0:
                    cons[e, k] = xi
                    cap[xi] = self.capin[b]
                    k += 1
            for lev in range(self.nlev):  # the uplinks crossed; a group of one's is folded
                ga = self.labels[lev, a]
                gb = self.labels[lev, b]
                if ga == gb:
                    continue
                if self.has_bw and self.alone[lev, ga]:
                    pc = fold(cap, xo, pc, self.uplink[lev, ga])
                else:
                    x = ne + 2 * n + 2 * (lev * G + ga)
                    cons[e, k] = x
                    cap[x] = self.uplink[lev, ga]
                    k += 1
                if self.has_bw and self.alone[lev, gb]:
                    pc = fold(cap, xi, pc, self.uplink_in[lev, gb])
                else:
                    x = ne + 2 * n + 2 * (lev * G + gb) + 1
                    cons[e, k] = x
                    cap[x] = self.uplink_in[lev, gb]
                    k += 1
            if self.has_bw:
                cap[e] = pc
            self.ncons[e] = k
            wait[e] = self.dep_count[e]
            status[e] = 0
            if wait[e] == 0:
                status[e] = 1
                start[e] = elat[e]
                due[nd] = e
                nd += 1
        while ndone < ne:
            if nm:
                self.fair_rates(nm)
            t_end = INF
            for i in range(nm):
                e = mv[i]
                end[e] = now + (left[e] / rate[e] if left[e] > 0 else 0.0)
                if end[e] < t_end:
                    t_end = end[e]
            t_start = INF
            for i in range(nd):
                if start[due[i]] < t_start:
                    t_start = start[due[i]]
            nxt = t_end if t_end < t_start else t_start
            dt = nxt - now
            for i in range(nm):
                e = mv[i]
                if rate[e] != INF:
                    left[e] -= rate[e] * dt
            now = nxt
            tol = now * (1 + TIE)
            j = 0
            for i in range(nm):
                e = mv[i]
                if end[e] <= tol:
                    status[e] = 3
                    left[e] = 0.0
                    ndone += 1
                    if now > finish:
                        finish = now
                    for k in range(self.dnt_ptr[e], self.dnt_ptr[e + 1]):
                        x = self.dnt_idx[k]
                        wait[x] -= 1
                        if wait[x] == 0:
                            status[x] = 1
                            start[x] = now + elat[x]
                            due[nd] = x
                            nd += 1
                else:
                    mv[j] = e
                    j += 1
            nm = j
            m0 = nm  # those that start now join in transfer order (the rounding follows it)
            j = 0
            for i in range(nd):
                e = due[i]
                if start[e] <= tol:
                    status[e] = 2
                    k = nm
                    while k > m0 and mv[k - 1] > e:
                        mv[k] = mv[k - 1]
                        k -= 1
                    mv[k] = e
                    nm += 1
                else:
                    due[j] = e
                    j += 1
            nd = j
        return finish
