# Header-only C-level helpers shared by the cost-model kernels (schedule,
# pairwise and contention evaluators): how a new order relates to the cached
# one, sorted top-value lists with transfer ids, and the first-improvement
# swap search driven step by step.
#
# The search is a small state machine rather than a loop over callbacks, so
# each evaluator keeps its own (inlined) delta and apply:
#
#     if not search_start(&ss, n, seed, max_moves, time_limit, fixed0, rel_tol):
#         return 0, 0, 0
#     <sync the cache to ``order``>; ss.cost = <cost of the cached order>
#     while search_next(&ss):
#         if search_accept(&ss, <delta of ss.i, ss.j>):
#             <apply the swap of ss.i, ss.j>
#     return ss.moves, ss.evals, ss.stop

from libc.string cimport memcmp
from _ring_common cimport now_s, rng_int

cdef enum:
    SAME = 0  # order_change: the orders are equal
    ONE_SWAP = 1  # they differ by the swap of two entries
    CHANGED = 2  # anything else, or no cached order yet


cdef inline int order_change(const long long *order, const long long *cur, Py_ssize_t n,
                             bint valid, Py_ssize_t *p, Py_ssize_t *q) noexcept nogil:
    """How ``order`` differs from the cached ``cur`` (``valid``: there is one);
    for ``ONE_SWAP`` the two positions go to ``p`` < ``q``."""
    cdef Py_ssize_t k, nd = 0
    if not valid:
        return CHANGED
    if memcmp(order, cur, n * sizeof(long long)) == 0:
        return SAME
    for k in range(n):
        if order[k] != cur[k]:
            nd += 1
            if nd == 1:
                p[0] = k
            elif nd == 2:
                q[0] = k
            else:
                break
    if nd == 2 and order[p[0]] == cur[q[0]] and order[q[0]] == cur[p[0]]:
        return ONE_SWAP
    return CHANGED


# ------------------------------------------------- sorted top lists with ids
cdef inline bint has_id(const long long *ids, Py_ssize_t nid, long long e) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(nid):
        if ids[q] == e:
            return True
    return False


cdef inline void top_insert(double *tv, long long *ti, long long *tn, Py_ssize_t k, double v,
                            long long e, bint complete) noexcept nogil:
    """Put ``v`` (id ``e``) in the descending list ``tv``/``ti`` of ``tn[0]`` (at
    most ``k``) values when the list stays the largest values. ``complete``:
    the list holds every value so far (else a value below its last is left out)."""
    cdef Py_ssize_t t, m = tn[0]
    if m == k:
        if v <= tv[k - 1]:
            return
        m = k - 1
    elif not complete and (m == 0 or v < tv[m - 1]):
        return
    t = m
    while t > 0 and tv[t - 1] < v:
        tv[t] = tv[t - 1]
        ti[t] = ti[t - 1]
        t -= 1
    tv[t] = v
    ti[t] = e
    tn[0] = m + 1


cdef inline Py_ssize_t top_drop(double *tv, long long *ti, Py_ssize_t m, const long long *ids,
                                Py_ssize_t nid) noexcept nogil:
    """Remove the entries whose id is in ``ids`` (order kept); the new length."""
    cdef Py_ssize_t t, k = 0
    for t in range(m):
        if not has_id(ids, nid, ti[t]):
            tv[k] = tv[t]
            ti[k] = ti[t]
            k += 1
    return k


# ------------------------------------------------- first-improvement swap search
cdef struct SwapSearch:
    unsigned long long state
    long long lo, m, i, j, ii, jj, r
    long long moves, evals, since, max_moves
    double t0, time_limit, rel_tol, cost, scale
    int stop  # 0 = local optimum, 1 = time limit, 2 = max moves


cdef inline bint search_start(SwapSearch *ss, Py_ssize_t n, unsigned long long seed,
                              long long max_moves, double time_limit, bint fixed0,
                              double rel_tol) noexcept nogil:
    """Start a search over new ranks ``[fixed0, n)``; False when fewer than two.

    ``i`` is visited in a random cyclic order, and for each ``j`` from a
    random offset; the first swap that lowers the cost by more than
    ``rel_tol`` times the start cost is applied. The search stops at a local
    optimum (a full sweep of ``i`` without improvement), after ``max_moves``
    moves (``<= 0``: no limit) or ``time_limit`` seconds (``<= 0``: none).
    The caller sets ``cost`` before the first :func:`search_next`.
    """
    ss.t0 = now_s()
    ss.state = seed
    ss.lo = 1 if fixed0 else 0
    ss.m = n - ss.lo
    ss.max_moves = max_moves
    ss.time_limit = time_limit
    ss.rel_tol = rel_tol
    ss.moves = 0
    ss.evals = 0
    ss.since = 0
    ss.stop = 0
    ss.cost = 0.0
    if ss.m < 2:
        return False
    ss.ii = rng_int(&ss.state, ss.m)
    ss.i = ss.lo + ss.ii
    ss.r = rng_int(&ss.state, ss.m)
    ss.jj = 0
    return True


cdef inline bint search_next(SwapSearch *ss) noexcept nogil:
    """Next pair ``(ss.i, ss.j)`` to evaluate; False when the search stops."""
    while True:
        while ss.jj < ss.m:
            ss.j = ss.lo + (ss.r + ss.jj) % ss.m
            ss.jj += 1
            if ss.j != ss.i:
                return True
        ss.since += 1  # the sweep of ss.i is over
        if ss.since > ss.m:
            return False
        if ss.max_moves > 0 and ss.moves >= ss.max_moves:
            ss.stop = 2
            return False
        if ss.time_limit > 0 and now_s() - ss.t0 > ss.time_limit:
            ss.stop = 1
            return False
        ss.ii = (ss.ii + 1) % ss.m
        ss.i = ss.lo + ss.ii
        ss.r = rng_int(&ss.state, ss.m)
        ss.jj = 0


cdef inline bint search_accept(SwapSearch *ss, double d) noexcept nogil:
    """Count the evaluation of ``(ss.i, ss.j)`` with cost change ``d``; True
    when the caller must apply that swap (the sweep of ``ss.i`` then ends)."""
    # the tolerance is relative to the cost at the start (a fixed scale): the
    # running cost drifts by rounding, and at or below zero a threshold on it
    # accepts zero-change swaps for ever
    if ss.evals == 0:
        ss.scale = ss.cost
    ss.evals += 1
    if ss.scale > 0 and d < -ss.rel_tol * ss.scale:
        ss.cost += d
        ss.moves += 1
        ss.since = 0
        ss.jj = ss.m
        return True
    return False
