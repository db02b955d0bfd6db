# The base class of the cost-model evaluators (StepEval, StepContention,
# PairwiseEval): a cached order brought up to date by a swap or a rebuild, and
# the Python API (cost, batch_cost, swap_delta, swap_deltas, search) written
# once on top of the C-level methods each evaluator defines:
#
#   _full(o)       cost of the order ``o``, from scratch
#   _state_cost()  cost of the cached order ``cur``, from the cached state
#   _rebuild(o)    cache ``o`` (sets ``cur`` and ``valid``)
#   _apply(i, j)   swap new ranks ``i`` and ``j`` in the cache
#   _delta(i, j)   cost change of that swap, the cache left as it was
#
# The declarations are in rankopt/models/_swap_eval.pxd. The C-level methods
# are called through the class's table of C function pointers, as any cdef
# method is: no Python-level dispatch in the loops.

from libc.string cimport memcpy
from _model_common cimport (ONE_SWAP, CHANGED, SwapSearch, order_change, search_accept,
                            search_next, search_start)


cdef class SwapEval:
    """Cached order and Python API shared by the cost-model evaluators."""

    cdef void _init_cache(self, Py_ssize_t n):
        import numpy as np
        self.n = n
        self.cur = np.full(n, -1, dtype=np.int64)
        self.valid = False

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
