# The base class of the cost-model evaluators (StepEval, StepContention,
# PairwiseEval): a cached order brought up to date by a swap or a rebuild, and
# the Python API (cost, batch_cost, swap_delta, swap_deltas, search) written
# once on top of the C-level methods each evaluator defines:
#
#   _full(o)       cost of the order ``o``, from scratch
#   _state_cost()  cost of the cached order ``cur``, from the cached state
#   _rebuild(o)    cache ``o`` (sets ``cur`` and ``valid``)
#   _apply(i, j)   swap new ranks ``i`` and ``j`` in the cache
#   _delta(i, j)   cost change of that swap, the cache left as it was; it
#                  may also set ``tie``, the change of a secondary measure
#                  that breaks ties between equal costs (0 by default)
#
# The declarations are in rankopt/models/_swap_eval.pxd. The C-level methods
# are called through the class's table of C function pointers, as any cdef
# method is: no Python-level dispatch in the loops.
#
# Also here: ``guided``, a swap descent whose proposals follow the schedule's
# partners and the network's groups (what large step-schedule solves run), and
# ``SwapSum``, the weighted sum of evaluators (a workload of several calls)
# behind the same interface.

from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from _model_common cimport (ONE_SWAP, CHANGED, SwapSearch, order_change, search_accept,
                            search_next, search_start)
from _ring_common cimport now_s, rng_int, rng_uniform


cdef struct Proposals:
    # what ``SwapEval.guided`` draws its swaps from (see there)
    const long long *cur
    const long long *pos
    Py_ssize_t n, nlev, gw
    long long lo, m
    const long long *pptr
    const long long *pidx
    const double *pcum
    const long long *labels
    const long long *gptr
    const long long *gmem
    const double *lcum
    double p_random, p_bring


cdef inline long long _partner(const Proposals *pr, long long k,
                               unsigned long long *state) noexcept nogil:
    """A partner of new rank ``k`` drawn in proportion to its bytes (``k`` has one)."""
    cdef Py_ssize_t a = pr.pptr[k], b = pr.pptr[k + 1] - 1
    cdef double u = rng_uniform(state) * pr.pcum[b]
    while a < b and pr.pcum[a] <= u:
        a += 1
    return pr.pidx[a]


cdef inline bint _propose(const Proposals *pr, unsigned long long *state, long long *pi,
                          long long *pj) noexcept nogil:
    """A swap ``(i, j)`` for ``SwapEval.guided``; False when the draw moves nothing."""
    cdef long long i = pr.lo + rng_int(state, pr.m), j, q, g, p, a, b
    cdef Py_ssize_t L = 0
    cdef double u = rng_uniform(state)
    cdef bint bring
    if pr.nlev == 0 or u < pr.p_random or pr.pptr[i + 1] == pr.pptr[i]:
        j = pr.lo + rng_int(state, pr.m)
    else:
        u = rng_uniform(state)
        while L < pr.nlev - 1 and pr.lcum[L] <= u:
            L += 1
        bring = rng_uniform(state) < pr.p_bring
        if bring:  # (a) a process of a partner's group comes to i
            g = pr.labels[L * pr.n + pr.cur[_partner(pr, i, state)]]
        else:  # (b) the process at i goes next to a process of its group
            g = pr.labels[L * pr.n + pr.cur[i]]
        a = L * pr.n + pr.gptr[L * pr.gw + g]
        b = L * pr.n + pr.gptr[L * pr.gw + g + 1]
        p = pr.gmem[a + rng_int(state, b - a)]
        if bring:
            j = pr.pos[p]
        else:
            q = pr.pos[p]
            if pr.pptr[q + 1] == pr.pptr[q]:
                return False
            j = _partner(pr, q, state)
    pi[0] = i
    pj[0] = j
    return j != i and j >= pr.lo


cdef class SwapEval:
    """Cached order and Python API shared by the cost-model evaluators."""

    cdef void _init_cache(self, Py_ssize_t n):
        import numpy as np
        self.n = n
        self.cur = np.full(n, -1, dtype=np.int64)
        self.valid = False
        self.tie = 0.0

    cdef double _full(self, const long long[::1] o) noexcept nogil:
        return 0.0

    cdef double _state_cost(self) noexcept nogil:
        return self._full(self.cur)

    cdef void _rebuild(self, const long long[::1] o) noexcept nogil:
        memcpy(&self.cur[0], &o[0], self.n * sizeof(long long))
        self.valid = True

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        pass

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        return 0.0

    cdef void _sync(self, const long long[::1] o) noexcept nogil:
        """Bring the cache up to ``o``: nothing, one swap, or a rebuild."""
        cdef Py_ssize_t p, q
        cdef int how = order_change(&o[0], &self.cur[0], self.n, self.valid, &p, &q)
        if how == ONE_SWAP:
            self._apply(p, q)
        elif how == CHANGED:
            self._rebuild(o)

    # ------------------------------------------------------------ python API
    @property
    def incremental(self):
        """Whether a swap delta and an applied swap cost ``O(transfers of the two
        ranks)``, not ``O(step size)`` per step they touch (what makes long
        searches on large jobs affordable)."""
        return True

    def cost(self, const long long[::1] order):
        """Modelled seconds under ``order``."""
        cdef double c
        with nogil:
            c = self._full(order)
        return c

    def batch_cost(self, const long long[:, ::1] orders):
        """Costs of many orders, one per row."""
        import numpy as np
        out_np = np.empty(orders.shape[0], dtype=np.float64)
        cdef double[::1] out = out_np
        cdef Py_ssize_t r
        with nogil:
            for r in range(orders.shape[0]):
                out[r] = self._full(orders[r])
        return out_np

    def swap_delta(self, const long long[::1] order, long long i, long long j):
        """Cost change when new ranks ``i`` and ``j`` swap processes."""
        cdef double d
        with nogil:
            self._sync(order)
            d = self._delta(i, j)
        return d

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

        Visits ``i`` in a random order and, for each, ``j`` from a random
        offset; applies the first swap that lowers the cost by more than
        ``rel_tol`` times the cost. Stops at a local optimum (a full sweep
        without improvement), after ``max_moves`` moves (``<= 0``: no limit)
        or ``time_limit`` seconds (``<= 0``: none).
        Returns ``(moves, evaluations, stop)`` with stop 0 = local optimum,
        1 = time limit, 2 = max moves.
        """
        cdef SwapSearch ss
        if not search_start(&ss, self.n, seed, max_moves, time_limit, fixed0, rel_tol):
            return 0, 0, 0
        with nogil:
            self._sync(order)
            ss.cost = self._state_cost()
            while search_next(&ss):
                if search_accept(&ss, self._delta(ss.i, ss.j)):
                    self._apply(ss.i, ss.j)
            memcpy(&order[0], &self.cur[0], self.n * sizeof(long long))
        return ss.moves, ss.evals, ss.stop

    def guided(self, long long[::1] order, unsigned long long seed, long long max_evals,
               double time_limit, bint fixed0, double rel_tol, long long patience,
               long long kick, const long long[::1] pptr, const long long[::1] pidx,
               const double[::1] pcum, const long long[:, ::1] labels,
               const long long[:, ::1] gptr, const long long[::1] gmem,
               const double[::1] lcum, double p_random, double p_bring, bint ties):
        """Swap descent with proposals that bring partners into one group, in place on ``order``.

        A proposal takes a new rank ``i`` (uniform over ``[fixed0, n)``) and
        a second rank ``j``: with probability ``p_random`` any other rank;
        otherwise, at a level ``L`` drawn by ``lcum`` (cumulative
        probabilities), either (a, probability ``p_bring``) a rank whose
        process shares the level-``L`` group of the process at a partner
        ``q`` of ``i`` -- the swap brings a process of that group to ``i`` --
        or (b) a partner of a rank whose process shares the group of the
        process at ``i`` -- the swap takes the process at ``i`` next to a
        process of its group. Partners are drawn in proportion to the
        bytes they exchange (``pcum``: cumulative per rank). The swap is
        applied when it lowers the cost by more than ``rel_tol`` times the
        start cost, or (``ties``) leaves it unchanged and lowers the
        evaluator's tie-break measure (``tie``: with shared uplinks, the sum
        of squared uplink terms -- a step's slowest uplink can only get
        faster once the ones level with it have).

        After ``patience`` evaluations without an applied swap the descent
        has stalled: it stops (``kick <= 0``) or applies ``kick`` proposals
        whatever they cost and descends again (iterated local search); the
        cheapest order seen is returned.

        Parameters
        ----------
        pptr, pidx, pcum
            The partners of each new rank, CSR: ``pidx[pptr[k]:pptr[k + 1]]``
            and their cumulative byte weights.
        labels : (levels, n)
            Group of every process per level (levels that guide moves only).
        gptr, gmem
            Members of every group: level ``L``, group ``g`` holds processes
            ``gmem[L * n + gptr[L, g] : L * n + gptr[L, g + 1]]``.

        Returns ``(moves, evaluations, stop)``: stop 0 = the descent stalled
        (``kick <= 0``), 1 = time limit, 2 = ``max_evals``.
        """
        import numpy as np
        cdef Py_ssize_t n = self.n, k
        cdef Proposals pr
        cdef unsigned long long state = seed
        cdef long long lo = 1 if fixed0 else 0, m = n - lo, moves = 0, evals = 0, since = 0
        cdef long long i, j, _r, tries = 0
        cdef double start, scale, tie_scale, d, now, best, t0 = now_s()
        cdef int stop = 0
        pos_np = np.empty(n, dtype=np.int64)
        best_np = np.empty(n, dtype=np.int64)
        cdef long long[::1] pos = pos_np
        cdef long long[::1] keep = best_np
        if m < 2:
            return 0, 0, 0
        pr.n = n
        pr.lo = lo
        pr.m = m
        pr.nlev = labels.shape[0]
        pr.pptr = &pptr[0]
        pr.pidx = &pidx[0] if pidx.shape[0] else NULL
        pr.pcum = &pcum[0] if pcum.shape[0] else NULL
        pr.labels = &labels[0, 0] if pr.nlev else NULL
        pr.gptr = &gptr[0, 0] if pr.nlev else NULL
        pr.gw = gptr.shape[1]
        pr.gmem = &gmem[0] if pr.nlev else NULL
        pr.lcum = &lcum[0]
        pr.p_random = p_random
        pr.p_bring = p_bring
        with nogil:
            self._sync(order)
            pr.cur = &self.cur[0]
            pr.pos = &pos[0]
            for k in range(n):
                pos[self.cur[k]] = k
            start = self._state_cost()
            now = start
            best = start
            scale = rel_tol * start
            tie_scale = rel_tol * start * start
            if kick > 0:
                memcpy(&keep[0], &self.cur[0], n * sizeof(long long))
            while True:
                tries += 1  # draws that move nothing are bounded too
                if max_evals > 0 and (evals >= max_evals or tries > 16 * max_evals):
                    stop = 2
                    break
                if (tries & 255) == 0 and time_limit > 0 and now_s() - t0 > time_limit:
                    stop = 1
                    break
                if since >= patience:
                    if kick <= 0:
                        break
                    for _r in range(kick):  # stalled: a kick, then descend again
                        if not _propose(&pr, &state, &i, &j):
                            continue
                        now += self._delta(i, j)
                        evals += 1
                        self._apply(i, j)
                        pos[self.cur[i]] = i
                        pos[self.cur[j]] = j
                    since = 0
                    continue
                since += 1
                if not _propose(&pr, &state, &i, &j):
                    continue  # a proposal that moves nothing counts as a failed one
                d = self._delta(i, j)
                evals += 1
                if d < -scale or (ties and d <= 0.0 and self.tie < -tie_scale):
                    self._apply(i, j)
                    pos[self.cur[i]] = i
                    pos[self.cur[j]] = j
                    moves += 1
                    since = 0
                    now += d
                    if kick > 0 and now < best - scale:
                        best = now
                        memcpy(&keep[0], &self.cur[0], n * sizeof(long long))
            if kick > 0 and best < now - scale:
                memcpy(&order[0], &keep[0], n * sizeof(long long))
            else:
                memcpy(&order[0], &self.cur[0], n * sizeof(long long))
        return moves, evals, stop


cdef class SwapSum(SwapEval):
    """The weighted sum of evaluators over one set of processes (a workload of calls).

    Every method sums the parts' own (their caches move with this one's), so
    a search on the sum runs each part's incremental deltas.
    """

    cdef list parts
    cdef double[::1] weights
    cdef void **ptrs
    cdef Py_ssize_t k

    def __init__(self, parts, weights):
        import numpy as np
        cdef SwapEval part
        cdef Py_ssize_t q
        self.parts = list(parts)
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.k = len(self.parts)
        if self.k == 0 or self.weights.shape[0] != self.k:
            raise ValueError("SwapSum needs one weight per part and at least one part.")
        self._init_cache((<SwapEval>self.parts[0]).n)
        self.ptrs = <void **>malloc(self.k * sizeof(void *))
        if self.ptrs == NULL:
            raise MemoryError()
        for q in range(self.k):
            part = self.parts[q]
            if part.n != self.n:
                raise ValueError("SwapSum parts disagree on n.")
            self.ptrs[q] = <void *>part

    def __dealloc__(self):
        free(self.ptrs)

    @property
    def incremental(self):
        """Whether every part is incremental."""
        return all(part.incremental for part in self.parts)

    cdef double _full(self, const long long[::1] o) noexcept nogil:
        cdef double t = 0.0
        cdef Py_ssize_t q
        for q in range(self.k):
            t += self.weights[q] * (<SwapEval>self.ptrs[q])._full(o)
        return t

    cdef double _state_cost(self) noexcept nogil:
        cdef double t = 0.0
        cdef Py_ssize_t q
        for q in range(self.k):
            t += self.weights[q] * (<SwapEval>self.ptrs[q])._state_cost()
        return t

    cdef void _sync(self, const long long[::1] o) noexcept nogil:
        cdef Py_ssize_t q
        for q in range(self.k):
            (<SwapEval>self.ptrs[q])._sync(o)
        memcpy(&self.cur[0], &o[0], self.n * sizeof(long long))
        self.valid = True

    cdef void _rebuild(self, const long long[::1] o) noexcept nogil:
        cdef Py_ssize_t q
        for q in range(self.k):
            (<SwapEval>self.ptrs[q])._rebuild(o)
        memcpy(&self.cur[0], &o[0], self.n * sizeof(long long))
        self.valid = True

    cdef void _apply(self, long long i, long long j) noexcept nogil:
        cdef Py_ssize_t q
        cdef long long tmp = self.cur[i]
        for q in range(self.k):
            (<SwapEval>self.ptrs[q])._apply(i, j)
        self.cur[i] = self.cur[j]
        self.cur[j] = tmp

    cdef double _delta(self, long long i, long long j) noexcept nogil:
        cdef double d = 0.0
        cdef Py_ssize_t q
        self.tie = 0.0
        for q in range(self.k):
            d += self.weights[q] * (<SwapEval>self.ptrs[q])._delta(i, j)
            self.tie += self.weights[q] * (<SwapEval>self.ptrs[q]).tie
        return d
