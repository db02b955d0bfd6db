# Directed ring search: local search and iterated local search that keep the
# orientation of the ring, for an asymmetric matrix ``d`` where the cost of a
# ring is sum d[tour[k], tour[k + 1]].
#
# The symmetric kernels (_ring_search) reverse segments, which costs nothing
# there but changes the direction of every link inside the segment here. The
# moves below never reverse anything longer than an Or-opt run: each is an
# exchange of two adjacent blocks of the cyclic tour (A X Y B -> A Y X B),
# done by copying the two shorter of the three blocks it splits the tour into
# (X Y Z -> Y X Z is the same cycle as X Z Y and Z Y X), so its cost is at
# most 2n/3 positions and every delta is O(1).
#
# Moves (all from candidate lists of the symmetrised matrix):
#   * Or-opt: a run of 1-3 processes moved elsewhere, kept or reversed;
#   * or-3opt: two adjacent runs exchanged, a b..e f..c d -> a f..c b..e d.
# Kicks: a random exchange of two adjacent runs of at most ``window``.

from cython cimport floating
from libc.stdlib cimport malloc, free

from _ring_common cimport clamp_window, cyc, now_s, rng_int, tolerance

cdef enum:
    STOP_LOCAL_OPTIMUM = 0
    STOP_TIME_LIMIT = 1
    STOP_MAX_ITER = 2

    OP_EXCHANGE = 0
    OP_REVERSE = 1


cdef struct State:
    long long n
    long long *tour
    long long *pos
    long long *buf
    # undo log: (op, start, a, b)
    long long *log
    long long log_size
    long long log_cap
    bint logging
    # work queue of processes to look at (don't-look bits)
    long long *queue
    unsigned char *inq
    long long head
    long long tail
    # smallest gain that counts as an improvement (_ring_common.tolerance)
    double eps


cdef void free_state(State *s) noexcept nogil:
    free(s.tour)
    free(s.pos)
    free(s.buf)
    free(s.queue)
    free(s.inq)
    free(s.log)


cdef inline long long nxt(State *s, long long c) noexcept nogil:
    cdef long long p = s.pos[c] + 1
    return s.tour[0] if p == s.n else s.tour[p]


cdef inline long long prv(State *s, long long c) noexcept nogil:
    cdef long long p = s.pos[c] - 1
    return s.tour[s.n - 1] if p < 0 else s.tour[p]


cdef inline long long fwd(State *s, long long x, long long y) noexcept nogil:
    """Steps from x forward to y."""
    return cyc(s.pos[y] - s.pos[x], s.n)


cdef inline void push(State *s, long long c) noexcept nogil:
    if not s.inq[c]:
        s.inq[c] = 1
        s.queue[s.tail % s.n] = c
        s.tail += 1


cdef int log_op(State *s, long long op, long long start, long long a, long long b) noexcept nogil:
    cdef long long *grown
    cdef long long t
    if not s.logging:
        return 0
    if s.log_size + 4 > s.log_cap:
        grown = <long long *>malloc(2 * s.log_cap * sizeof(long long))
        if grown == NULL:
            return -1
        for t in range(s.log_size):
            grown[t] = s.log[t]
        free(s.log)
        s.log = grown
        s.log_cap *= 2
    s.log[s.log_size] = op
    s.log[s.log_size + 1] = start
    s.log[s.log_size + 2] = a
    s.log[s.log_size + 3] = b
    s.log_size += 4
    return 0


cdef void swap_blocks(State *s, long long start, long long a, long long b) noexcept nogil:
    """Positions start.. hold X (a) then Y (b); afterwards Y then X."""
    cdef long long n = s.n, k, p, c
    for k in range(b):
        s.buf[k] = s.tour[cyc(start + a + k, n)]
    for k in range(a):
        s.buf[b + k] = s.tour[cyc(start + k, n)]
    for k in range(a + b):
        p = cyc(start + k, n)
        c = s.buf[k]
        s.tour[p] = c
        s.pos[c] = p


cdef void exchange(State *s, long long start, long long a, long long b) noexcept nogil:
    """X Y Z -> Y X Z for X = [start, start + a), Y the next b positions.

    Copies the two shortest of the three blocks; the cycle is the same.
    """
    cdef long long n = s.n, z = n - a - b
    if a + b <= b + z and a + b <= z + a:
        swap_blocks(s, start, a, b)
        log_op(s, OP_EXCHANGE, start, a, b)
    elif b + z <= z + a:
        # X Y Z -> X Z Y
        swap_blocks(s, cyc(start + a, n), b, z)
        log_op(s, OP_EXCHANGE, cyc(start + a, n), b, z)
    else:
        # Z X Y -> X Z Y  (Z starts at start + a + b)
        swap_blocks(s, cyc(start + a + b, n), z, a)
        log_op(s, OP_EXCHANGE, cyc(start + a + b, n), z, a)


cdef void reverse_run(State *s, long long start, long long length) noexcept nogil:
    cdef long long i = start, j = cyc(start + length - 1, s.n), _t, ci, cj
    for _t in range(length // 2):
        ci = s.tour[i]
        cj = s.tour[j]
        s.tour[i] = cj
        s.pos[cj] = i
        s.tour[j] = ci
        s.pos[ci] = j
        i = cyc(i + 1, s.n)
        j = cyc(j - 1, s.n)
    log_op(s, OP_REVERSE, start, length, 0)


cdef void undo(State *s, long long keep) noexcept nogil:
    """Undo logged operations back to log size ``keep``."""
    cdef long long t, op, start, a, b
    cdef bint was = s.logging
    s.logging = False
    t = s.log_size - 4
    while t >= keep:
        op = s.log[t]
        start = s.log[t + 1]
        a = s.log[t + 2]
        b = s.log[t + 3]
        if op == OP_EXCHANGE:
            swap_blocks(s, start, b, a)
        else:
            reverse_run(s, start, a)
        t -= 4
    s.log_size = keep
    s.logging = was


cdef inline double run_cost(const floating[:, ::1] d, State *s, long long first,
                            long long last, bint backwards) noexcept nogil:
    """Cost of the links inside the run first..last (forward), walked either way."""
    cdef double total = 0.0
    cdef long long x = first, y
    while x != last:
        y = nxt(s, x)
        total += d[y, x] if backwards else d[x, y]
        x = y
    return total


cdef void move_run(State *s, long long s1, long long s2, long long c, bint rev) noexcept nogil:
    """Move the run s1..s2 to just after c (c outside the run), reversed if ``rev``."""
    cdef long long L = fwd(s, s1, s2) + 1
    cdef long long gap
    if fwd(s, s2, c) < fwd(s, c, s1):
        # s1..s2 [nx .. c] -> [nx .. c] s1..s2
        gap = fwd(s, s2, c)
        exchange(s, s.pos[s1], L, gap)
    else:
        # [cn .. p] s1..s2 -> s1..s2 [cn .. p], cn = next(c)
        gap = fwd(s, c, s1) - 1
        exchange(s, s.pos[nxt(s, c)], gap, L)
    if rev and L > 1:
        reverse_run(s, s.pos[s1], L)


cdef double or_opt(const floating[:, ::1] d, State *s, const long long[:, ::1] nb,
                   long long x, long long *evals) noexcept nogil:
    """First improving move of a run of 1-3 that starts or ends at x."""
    cdef Py_ssize_t kk, K = nb.shape[1]
    cdef long long n = s.n, L, side, s1, s2, p, nx, m, c, cn, e, t, _k
    cdef int end
    cdef bint rev
    cdef double g, inner_f, inner_b, delta
    for L in range(1, 4):
        if L + 3 > n:
            break
        for side in range(2):
            if side == 1 and L == 1:
                continue
            s1 = x
            s2 = x
            for _k in range(L - 1):
                if side == 0:
                    s2 = nxt(s, s2)
                else:
                    s1 = prv(s, s1)
            p = prv(s, s1)
            nx = nxt(s, s2)
            g = d[p, s1] + d[s2, nx] - d[p, nx]
            if g <= s.eps:
                continue
            inner_f = run_cost(d, s, s1, s2, False)
            inner_b = run_cost(d, s, s1, s2, True) if L > 1 else 0.0
            for end in range(2):
                e = s1 if end == 0 else s2
                for kk in range(K):
                    m = nb[e, kk]
                    # insert just after m (m -> run) or just before it (run -> m)
                    for t in range(2):
                        c = m if t == 0 else prv(s, m)
                        cn = nxt(s, c)
                        if fwd(s, s1, c) < L or cn == s1:
                            continue  # c inside the run, or the run already follows c
                        for rev in range(2 if L > 1 else 1):
                            evals[0] += 1
                            if not rev:
                                delta = d[c, s1] + d[s2, cn] - d[c, cn] - g
                            else:
                                delta = (d[c, s2] + d[s1, cn] - d[c, cn] - g
                                         + inner_b - inner_f)
                            if delta < -s.eps:
                                push(s, p)
                                push(s, nx)
                                push(s, s1)
                                push(s, s2)
                                push(s, c)
                                push(s, cn)
                                move_run(s, s1, s2, c, rev)
                                return delta
    return 0.0


cdef double or3opt(const floating[:, ::1] d, State *s, const long long[:, ::1] nb,
                   long long a, long long *evals) noexcept nogil:
    """a b..e f..c d -> a f..c b..e d: links (c,b), (e,d), (a,f) replace (a,b), (e,f), (c,d)."""
    cdef Py_ssize_t kk, ke, K = nb.shape[1]
    cdef long long b, c, dd, e, f
    cdef double g1, g2, total
    if s.n < 6:
        return 0.0
    b = nxt(s, a)
    for kk in range(K):
        c = nb[b, kk]
        g1 = d[a, b] - d[c, b]
        if g1 <= s.eps:
            continue
        if c == a:
            continue
        dd = nxt(s, c)
        if dd == a or dd == b:
            continue
        g1 += d[c, dd]
        for ke in range(K):
            e = nb[dd, ke]
            g2 = g1 - d[e, dd]
            if g2 <= s.eps:
                continue
            if e == c or fwd(s, b, e) > fwd(s, b, c):
                continue
            f = nxt(s, e)
            evals[0] += 1
            total = g2 + d[e, f] - d[a, f]
            if total > s.eps:
                push(s, a)
                push(s, b)
                push(s, c)
                push(s, dd)
                push(s, e)
                push(s, f)
                exchange(s, s.pos[b], fwd(s, b, e) + 1, fwd(s, f, c) + 1)
                return -total
    return 0.0


cdef double drain(const floating[:, ::1] d, State *s, const long long[:, ::1] nb,
                  long long *evals, long long *moves, double deadline, int *stop) noexcept nogil:
    cdef double total = 0.0, delta
    cdef long long x
    while s.head < s.tail:
        x = s.queue[s.head % s.n]
        s.head += 1
        s.inq[x] = 0
        while True:
            delta = or_opt(d, s, nb, x, evals)
            if delta == 0.0:
                delta = or3opt(d, s, nb, x, evals)
            if delta == 0.0:
                delta = or3opt(d, s, nb, prv(s, x), evals)
            if delta == 0.0:
                break
            total += delta
            moves[0] += 1
            if (moves[0] & 255) == 0 and deadline > 0 and now_s() > deadline:
                stop[0] = STOP_TIME_LIMIT
                return total
    return total


def directed_search(const floating[:, ::1] d, long long[::1] tour, const long long[:, ::1] nb,
                    unsigned long long seed, long long max_kicks, double time_limit=0.0,
                    long long window=50):
    """Orientation-keeping local search, then ``max_kicks`` kicks of iterated local search.

    Improves ``tour`` in place for the directed ring cost; a kick (exchange of
    two adjacent runs) is kept when the repaired ring is not longer.
    Returns (delta, evals, moves, kicks, stop).
    """
    cdef long long n = tour.shape[0], k, kicks = 0, evals = 0, moves = 0
    cdef long long i1, l1, l2, x
    cdef long long ends[6]
    cdef int stop = STOP_MAX_ITER, inner
    cdef unsigned long long state = seed
    cdef double total = 0.0, delta, deadline = now_s() + time_limit if time_limit > 0 else 0.0
    cdef State s
    if n < 6:
        return 0.0, 0, 0, 0, STOP_LOCAL_OPTIMUM
    s.n = n
    s.tour = <long long *>malloc(n * sizeof(long long))
    s.pos = <long long *>malloc(n * sizeof(long long))
    s.buf = <long long *>malloc(n * sizeof(long long))
    s.queue = <long long *>malloc(n * sizeof(long long))
    s.inq = <unsigned char *>malloc(n * sizeof(unsigned char))
    s.log_cap = 256
    s.log = <long long *>malloc(s.log_cap * sizeof(long long))
    s.log_size = 0
    s.logging = False
    s.head = 0
    s.tail = 0
    s.eps = tolerance(d)
    if (s.tour == NULL or s.pos == NULL or s.buf == NULL or s.queue == NULL
            or s.inq == NULL or s.log == NULL):
        free_state(&s)
        raise MemoryError()
    window = clamp_window(window, n, 1)
    with nogil:
        for k in range(n):
            s.tour[k] = tour[k]
            s.pos[tour[k]] = k
            s.inq[k] = 0
        for k in range(n):
            push(&s, s.tour[k])
        inner = STOP_LOCAL_OPTIMUM
        total = drain(d, &s, nb, &evals, &moves, deadline, &inner)
        if inner == STOP_TIME_LIMIT:
            stop = STOP_TIME_LIMIT
        s.logging = True
        while stop != STOP_TIME_LIMIT and kicks < max_kicks:
            i1 = rng_int(&state, n)
            l1 = 1 + rng_int(&state, window)
            l2 = 1 + rng_int(&state, window)
            ends[0] = s.tour[cyc(i1 - 1, n)]
            ends[1] = s.tour[i1]
            ends[2] = s.tour[cyc(i1 + l1 - 1, n)]
            ends[3] = s.tour[cyc(i1 + l1, n)]
            ends[4] = s.tour[cyc(i1 + l1 + l2 - 1, n)]
            ends[5] = s.tour[cyc(i1 + l1 + l2, n)]
            delta = (d[ends[0], ends[3]] + d[ends[4], ends[1]] + d[ends[2], ends[5]]
                     - d[ends[0], ends[1]] - d[ends[2], ends[3]] - d[ends[4], ends[5]])
            s.log_size = 0
            exchange(&s, i1, l1, l2)
            for x in range(6):
                push(&s, ends[x])
            evals += 1
            inner = STOP_LOCAL_OPTIMUM
            delta += drain(d, &s, nb, &evals, &moves, deadline, &inner)
            while s.head < s.tail:
                s.inq[s.queue[s.head % n]] = 0
                s.head += 1
            if delta < -s.eps:
                total += delta
            elif delta > s.eps:
                undo(&s, 0)
            kicks += 1
            if inner == STOP_TIME_LIMIT or (deadline > 0 and (kicks & 15) == 0
                                            and now_s() > deadline):
                stop = STOP_TIME_LIMIT
        if stop != STOP_TIME_LIMIT and max_kicks == 0:
            stop = STOP_LOCAL_OPTIMUM
        for k in range(n):
            tour[k] = s.tour[k]
    free_state(&s)
    return total, evals, moves, kicks, stop
