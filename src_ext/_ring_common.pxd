# Header-only C-level helpers shared by the ring kernels: random numbers, a
# monotonic clock, cyclic tour reversal, 2-opt / segment moves with an undo
# log, and the O(1) move deltas.
#
# A tour is an array ``tour`` of length n (``tour[k]`` = process at position
# k) with its inverse ``pos``. Every move is built from ``reverse_path``, which
# is its own inverse, so a move log can be undone exactly.

from cython cimport floating
from libc.stdlib cimport malloc, free


cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC


cdef inline double now_s() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef inline double tolerance(const floating[:, ::1] w) noexcept nogil:
    """Smallest gain that counts as an improvement: 1e-12 max |w|, at least 1e-300.

    A delta sums at most a dozen weights, so its rounding error is below
    ~2e-15 max |w|: a move that gains more than the tolerance shortens the ring
    for real, and the local searches terminate on any finite weights.
    """
    cdef Py_ssize_t i, j, n = w.shape[0]
    cdef double m = 0.0, x
    for i in range(n):
        for j in range(n):
            x = w[i, j] if w[i, j] >= 0.0 else -w[i, j]
            if x > m:
                m = x
    m *= 1e-12
    return m if m > 1e-300 else 1e-300


# splitmix64: tiny, fast, good enough for move selection; state passed explicitly.
cdef inline unsigned long long rng_next(unsigned long long *state) noexcept nogil:
    state[0] += 0x9E3779B97F4A7C15ULL
    cdef unsigned long long z = state[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline long long rng_int(unsigned long long *state, long long n) noexcept nogil:
    """Uniform integer in [0, n)."""
    return <long long>(rng_next(state) % <unsigned long long>n)


cdef inline double rng_uniform(unsigned long long *state) noexcept nogil:
    return (rng_next(state) >> 11) * (1.0 / 9007199254740992.0)


cdef inline long long cyc(long long i, long long n) noexcept nogil:
    i = i % n
    return i + n if i < 0 else i


cdef inline long long clamp_window(long long window, long long n,
                                   long long least) noexcept nogil:
    """``window`` kept within half the ring (``n // 2 - 1``) and at least ``least``."""
    if window > n // 2 - 1:
        window = n // 2 - 1
    return least if window < least else window


cdef inline long long succ(long long[::1] tour, long long[::1] pos, long long c,
                           long long n) noexcept nogil:
    cdef long long p = pos[c] + 1
    return tour[0] if p == n else tour[p]


cdef inline long long pred(long long[::1] tour, long long[::1] pos, long long c,
                           long long n) noexcept nogil:
    cdef long long p = pos[c] - 1
    return tour[n - 1] if p < 0 else tour[p]


cdef inline long long reverse_path(long long[::1] tour, long long[::1] pos,
                                   long long i, long long j, long long n) noexcept nogil:
    """Reverse the cyclic run of positions i..j (inclusive).

    When the run is longer than half the tour the complement is reversed
    instead: for a symmetric matrix both give the same cyclic tour (up to
    orientation). The choice depends only on (i, j, n), so calling it twice
    restores the tour. Returns the number of elements moved.
    """
    cdef long long length = cyc(j - i, n) + 1
    cdef long long a, b, _k, ta, tb, half
    if 2 * length > n:
        a = cyc(j + 1, n)
        b = cyc(i - 1, n)
        length = n - length
    else:
        a = i
        b = j
    half = length // 2
    for _k in range(half):
        ta = tour[a]
        tb = tour[b]
        tour[a] = tb
        pos[tb] = a
        tour[b] = ta
        pos[ta] = b
        a += 1
        if a == n:
            a = 0
        b -= 1
        if b < 0:
            b = n - 1
    return length


cdef inline double delta_two_opt(const floating[:, ::1] w, long long a, long long b,
                                 long long c, long long d) noexcept nogil:
    """Change of a symmetric ring sum when edges (a,b), (c,d) become (a,c), (b,d)."""
    return w[a, c] + w[b, d] - w[a, b] - w[c, d]


cdef inline double delta_or_opt(const floating[:, ::1] w, long long p, long long s1,
                                long long s2, long long nx, long long c, long long d,
                                bint rev) noexcept nogil:
    """Change when the run s1..s2 (between p and nx) moves between c and d.

    ``rev`` inserts it as c, s2..s1, d; otherwise c, s1..s2, d.
    """
    cdef double removed = w[p, s1] + w[s2, nx] + w[c, d]
    cdef double added = w[p, nx]
    if rev:
        added += w[c, s2] + w[s1, d]
    else:
        added += w[c, s1] + w[s2, d]
    return added - removed


cdef struct Log:
    long long *i
    long long *j
    long long size
    long long cap
    bint enabled


cdef inline void log_reversal(Log *log, long long i, long long j) noexcept nogil:
    """Append the reversal of positions i..j to ``log``."""
    cdef long long *ni
    cdef long long *nj
    cdef long long t
    if log.size == log.cap:
        ni = <long long *>malloc(2 * log.cap * sizeof(long long))
        nj = <long long *>malloc(2 * log.cap * sizeof(long long))
        for t in range(log.size):
            ni[t] = log.i[t]
            nj[t] = log.j[t]
        free(log.i)
        free(log.j)
        log.i = ni
        log.j = nj
        log.cap *= 2
    log.i[log.size] = i
    log.j[log.size] = j
    log.size += 1


cdef inline void do_reverse(long long[::1] tour, long long[::1] pos, long long i,
                            long long j, long long n, Log *log) noexcept nogil:
    reverse_path(tour, pos, i, j, n)
    if log.enabled:
        log_reversal(log, i, j)


cdef inline void undo_log(long long[::1] tour, long long[::1] pos, long long n,
                          Log *log) noexcept nogil:
    cdef long long t
    for t in range(log.size - 1, -1, -1):
        reverse_path(tour, pos, log.i[t], log.j[t], n)
    log.size = 0


cdef inline void flip(long long[::1] tour, long long[::1] pos, long long n,
                      long long a, long long b, long long c, long long d,
                      Log *log) noexcept nogil:
    """2-opt move: edges {a,b}, {c,d} become {a,c}, {b,d}.

    Valid when, in one orientation of the tour, b follows a and d follows c;
    the current orientation is read here, so the caller need not track it.
    """
    if succ(tour, pos, a, n) == b:
        do_reverse(tour, pos, pos[b], pos[c], n, log)
    else:
        do_reverse(tour, pos, pos[a], pos[d], n, log)


cdef inline void move_segment(long long[::1] tour, long long[::1] pos, long long n,
                              long long s1, long long s2, long long c, long long d,
                              bint rev, Log *log) noexcept nogil:
    """Move the run s1..s2 (forward) between adjacent c, d (d = succ(c)).

    Ends as c, s2..s1, d when ``rev`` else c, s1..s2, d: two or three flips.
    """
    cdef long long p = pred(tour, pos, s1, n)
    cdef long long nx = succ(tour, pos, s2, n)
    cdef long long span_a = cyc(pos[c] - pos[nx], n)
    cdef long long span_b = cyc(pos[p] - pos[d], n)
    if span_a <= span_b:
        # p [s1..s2] nx ... c d  ->  p c ... nx s2..s1 d  ->  p nx ... c s2..s1 d
        flip(tour, pos, n, p, s1, c, d, log)
        if c != nx:
            flip(tour, pos, n, p, c, nx, s2, log)
    else:
        # c d ... p [s1..s2] nx  ->  c s2..s1 p ... d nx  ->  c s2..s1 d ... p nx
        flip(tour, pos, n, c, d, s2, nx, log)
        if d != p:
            flip(tour, pos, n, s1, p, d, nx, log)
    if not rev and s1 != s2:
        flip(tour, pos, n, c, s2, s1, d, log)
