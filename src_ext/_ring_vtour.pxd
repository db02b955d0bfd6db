# Header-only virtual tour: the ring that a few flips of an array tour would
# make, kept as a list of runs of the unchanged array instead.
#
# The chain of k-opt steps of _ring_kopt makes moves that do not gain yet and
# takes them all back when no later step closes with a gain, which is what
# most chains do. On the array tour each of those flips moves up to n / 2
# entries twice (made, then undone): at n = 4,096 they were about half the
# time of a kick. Here a flip of ring positions i .. j costs O(runs): the
# ring is the runs ``lo[r] .. hi[r]`` of the real array (walked backwards
# when ``rev[r]``), in ring order, and a reversal splits at most three runs
# and reverses the order and direction of the runs between. Only a chain
# that gains is made on the array, by replaying its logged flips.
#
# Every query gives what the same flips made on the array would give:
# ring positions (the complement of a run longer than half the ring is
# reversed, as ``reverse_path`` does), successors and predecessors.
# ``ident``: one forward run, the array as it is; the queries then read the
# arrays directly.

from _ring_common cimport cyc


cdef enum:
    # runs of a virtual tour: each flip adds at most 3, and a chain of k-opt steps
    # makes at most 64 flips (2 (KOPT_MAX - 1) KOPT_MAX_STEPS)
    VT_MAX = 200
    VT_BUCKETS = 128  # the most entries of the table from array positions to runs


cdef struct VTour:
    const long long *tour   # the array tour and its inverse, never written here
    const long long *pos
    long long n
    long long nseg
    bint ident              # one forward run: the arrays as they are
    long long lo[VT_MAX]    # run r: array positions lo .. hi, backwards when rev
    long long hi[VT_MAX]
    unsigned char rev[VT_MAX]
    long long off[VT_MAX + 1]  # ring position of each run's first entry; off[nseg] = n
    long long byl[VT_MAX]      # the runs sorted by lo
    int shift                  # array positions p .. p + 2**shift - 1 share a bucket
    int tab[VT_BUCKETS]        # per bucket: where in ``byl`` the run of its first position is


cdef inline void vt_init(VTour *v, const long long *tour, const long long *pos,
                         long long n) noexcept nogil:
    v.tour = tour
    v.pos = pos
    v.n = n
    v.shift = 0
    while (n >> v.shift) >= VT_BUCKETS:
        v.shift += 1
    vt_reset(v)


cdef inline void vt_reset(VTour *v) noexcept nogil:
    """Back to the array as it is (one forward run)."""
    v.nseg = 1
    v.ident = True
    v.lo[0] = 0
    v.hi[0] = v.n - 1
    v.rev[0] = 0
    v.off[0] = 0
    v.off[1] = v.n
    v.byl[0] = 0


cdef inline long long vt_run_of(const VTour *v, long long p) noexcept nogil:
    """The run that holds array position ``p``: from its bucket's first run on (by lo)."""
    cdef long long k = v.tab[p >> v.shift]
    while k + 1 < v.nseg and v.lo[v.byl[k + 1]] <= p:
        k += 1
    return v.byl[k]


cdef inline long long vt_run_at(const VTour *v, long long q) noexcept nogil:
    """The run that holds ring position ``q``."""
    cdef long long a = 0, b = v.nseg - 1, m
    while a < b:
        m = (a + b + 1) >> 1
        if v.off[m] <= q:
            a = m
        else:
            b = m - 1
    return a


cdef inline long long vt_pos(const VTour *v, long long x) noexcept nogil:
    """Ring position of process ``x``."""
    cdef long long p = v.pos[x]
    if v.ident:
        return p
    return _pos_runs(v, p)


cdef inline long long _pos_runs(const VTour *v, long long p) noexcept nogil:
    """``vt_pos`` of the process at array position ``p``, the ring made of runs."""
    cdef long long r = vt_run_of(v, p)
    return v.off[r] + (v.hi[r] - p if v.rev[r] else p - v.lo[r])


cdef inline long long vt_at(const VTour *v, long long q) noexcept nogil:
    """The process at ring position ``q``."""
    cdef long long r, d
    if v.ident:
        return v.tour[q]
    r = vt_run_at(v, q)
    d = q - v.off[r]
    return v.tour[v.hi[r] - d] if v.rev[r] else v.tour[v.lo[r] + d]


cdef inline long long vt_succ(const VTour *v, long long x) noexcept nogil:
    """The process after ``x`` on the ring."""
    cdef long long p = v.pos[x]
    if v.ident:
        return v.tour[0] if p + 1 == v.n else v.tour[p + 1]
    return _succ_runs(v, p)


cdef inline long long vt_pred(const VTour *v, long long x) noexcept nogil:
    """The process before ``x`` on the ring."""
    cdef long long p = v.pos[x]
    if v.ident:
        return v.tour[v.n - 1] if p == 0 else v.tour[p - 1]
    return _pred_runs(v, p)


cdef inline long long _succ_runs(const VTour *v, long long p) noexcept nogil:
    """``vt_succ`` of the process at array position ``p``, the ring made of runs."""
    cdef long long r = vt_run_of(v, p)
    if v.rev[r]:
        if p > v.lo[r]:
            return v.tour[p - 1]
    elif p < v.hi[r]:
        return v.tour[p + 1]
    r = r + 1 if r + 1 < v.nseg else 0
    return v.tour[v.hi[r]] if v.rev[r] else v.tour[v.lo[r]]


cdef inline long long _pred_runs(const VTour *v, long long p) noexcept nogil:
    """``vt_pred`` of the process at array position ``p``, the ring made of runs."""
    cdef long long r = vt_run_of(v, p)
    if v.rev[r]:
        if p < v.hi[r]:
            return v.tour[p + 1]
    elif p > v.lo[r]:
        return v.tour[p - 1]
    r = r - 1 if r > 0 else v.nseg - 1
    return v.tour[v.lo[r]] if v.rev[r] else v.tour[v.hi[r]]


cdef inline void _cut(long long lo, long long hi, unsigned char rev, long long d,
                      long long *out) noexcept nogil:
    """A run cut after its first ``d`` entries (in ring order): out = lo1, hi1, lo2, hi2."""
    if rev:
        out[0] = hi - d + 1
        out[1] = hi
        out[2] = lo
        out[3] = hi - d
    else:
        out[0] = lo
        out[1] = lo + d - 1
        out[2] = lo + d
        out[3] = hi


cdef inline void _split(VTour *v, long long q) noexcept nogil:
    """A run starts at ring position ``q`` (0 < q < n)."""
    cdef long long r = vt_run_at(v, q), s
    cdef long long c[4]
    if v.off[r] == q:
        return
    _cut(v.lo[r], v.hi[r], v.rev[r], q - v.off[r], c)
    s = v.nseg
    while s > r + 1:
        v.lo[s] = v.lo[s - 1]
        v.hi[s] = v.hi[s - 1]
        v.rev[s] = v.rev[s - 1]
        v.off[s + 1] = v.off[s]
        s -= 1
    v.off[r + 2] = v.off[r + 1]
    v.lo[r] = c[0]
    v.hi[r] = c[1]
    v.lo[r + 1] = c[2]
    v.hi[r + 1] = c[3]
    v.rev[r + 1] = v.rev[r]
    v.off[r + 1] = q
    v.nseg += 1


cdef inline void _flip_runs(VTour *v, long long a, long long b) noexcept nogil:
    """Runs a .. b in reverse order, each walked the other way."""
    cdef long long t
    cdef unsigned char u
    while a < b:
        t = v.lo[a]
        v.lo[a] = v.lo[b]
        v.lo[b] = t
        t = v.hi[a]
        v.hi[a] = v.hi[b]
        v.hi[b] = t
        u = v.rev[a]
        v.rev[a] = v.rev[b] ^ 1
        v.rev[b] = u ^ 1
        a += 1
        b -= 1
    if a == b:
        v.rev[a] ^= 1


cdef inline void _tidy(VTour *v) noexcept nogil:
    """Join runs that continue each other, then ring positions and the runs by lo."""
    cdef long long r, w = 0, x, j
    cdef bint f0, f1, b0, b1
    for r in range(1, v.nseg):
        f0 = (not v.rev[w]) or v.lo[w] == v.hi[w]
        b0 = v.rev[w] or v.lo[w] == v.hi[w]
        f1 = (not v.rev[r]) or v.lo[r] == v.hi[r]
        b1 = v.rev[r] or v.lo[r] == v.hi[r]
        if f0 and f1 and v.hi[w] + 1 == v.lo[r]:
            v.hi[w] = v.hi[r]
            v.rev[w] = 0
        elif b0 and b1 and v.lo[w] - 1 == v.hi[r]:
            v.lo[w] = v.lo[r]
            v.rev[w] = 1
        else:
            w += 1
            v.lo[w] = v.lo[r]
            v.hi[w] = v.hi[r]
            v.rev[w] = v.rev[r]
    v.nseg = w + 1
    v.off[0] = 0
    for r in range(v.nseg):
        v.off[r + 1] = v.off[r] + v.hi[r] - v.lo[r] + 1
        x = r  # insertion sort by lo
        j = r - 1
        while j >= 0 and v.lo[v.byl[j]] > v.lo[x]:
            v.byl[j + 1] = v.byl[j]
            j -= 1
        v.byl[j + 1] = x
    v.ident = v.nseg == 1 and not v.rev[0]
    if v.ident:
        return
    for j in range(v.nseg):  # each bucket: the run (by lo) of its first position
        r = v.byl[j]
        for x in range((v.lo[r] + (1 << v.shift) - 1) >> v.shift, (v.hi[r] >> v.shift) + 1):
            v.tab[x] = <int>j


cdef inline void vt_reverse(VTour *v, long long i, long long j) noexcept nogil:
    """``reverse_path(tour, pos, i, j, n)`` on the virtual tour: ring positions i .. j
    reversed, or their complement when that is shorter."""
    cdef long long n = v.n, length = cyc(j - i, n) + 1, a, e, ra, rb, r, k, cnt, need
    cdef long long tl[VT_MAX]
    cdef long long th[VT_MAX]
    cdef unsigned char tr[VT_MAX]
    cdef long long c[4]
    if 2 * length > n:
        a = cyc(j + 1, n)
        length = n - length
    else:
        a = i
    if length < 2:
        return
    e = a + length
    if a > 0:
        _split(v, a)
    if e < n:
        _split(v, e)
    elif e > n:
        _split(v, e - n)
    ra = vt_run_at(v, a)
    if e <= n:
        rb = vt_run_at(v, e - 1)
        _flip_runs(v, ra, rb)
        _tidy(v)
        return
    # the positions a .. n - 1 and 0 .. e - n - 1: runs ra .. nseg - 1 and 0 .. rb
    rb = vt_run_at(v, e - n - 1)
    cnt = 0
    for r in range(rb, -1, -1):  # the runs from a on, reversed, each the other way
        tl[cnt] = v.lo[r]
        th[cnt] = v.hi[r]
        tr[cnt] = v.rev[r] ^ 1
        cnt += 1
    for r in range(v.nseg - 1, ra - 1, -1):
        tl[cnt] = v.lo[r]
        th[cnt] = v.hi[r]
        tr[cnt] = v.rev[r] ^ 1
        cnt += 1
    # the first n - a entries go to positions a .. n - 1, the rest to 0 .. e - n - 1
    need = n - a
    k = 0
    while need > 0 and th[k] - tl[k] + 1 <= need:
        need -= th[k] - tl[k] + 1
        k += 1
    if need > 0:  # run k straddles position n: cut it
        _cut(tl[k], th[k], tr[k], need, c)
        r = cnt
        while r > k + 1:
            tl[r] = tl[r - 1]
            th[r] = th[r - 1]
            tr[r] = tr[r - 1]
            r -= 1
        tl[k] = c[0]
        th[k] = c[1]
        tl[k + 1] = c[2]
        th[k + 1] = c[3]
        tr[k + 1] = tr[k]
        cnt += 1
        k += 1
    # new order: the tail of the reversed runs (positions 0 ..), the runs between
    # (rb + 1 .. ra - 1, in place), then its head (positions a ..)
    # move the runs between to their new index first (cnt - k of them come before)
    if cnt - k != rb + 1:
        if cnt - k > rb + 1:
            for r in range(ra - 1, rb, -1):
                v.lo[r - rb - 1 + cnt - k] = v.lo[r]
                v.hi[r - rb - 1 + cnt - k] = v.hi[r]
                v.rev[r - rb - 1 + cnt - k] = v.rev[r]
        else:
            for r in range(rb + 1, ra):
                v.lo[r - rb - 1 + cnt - k] = v.lo[r]
                v.hi[r - rb - 1 + cnt - k] = v.hi[r]
                v.rev[r - rb - 1 + cnt - k] = v.rev[r]
    for r in range(cnt - k):
        v.lo[r] = tl[k + r]
        v.hi[r] = th[k + r]
        v.rev[r] = tr[k + r]
    ra = cnt - k + (ra - rb - 1)  # index of the first head run
    for r in range(k):
        v.lo[ra + r] = tl[r]
        v.hi[ra + r] = th[r]
        v.rev[ra + r] = tr[r]
    v.nseg = ra + k
    _tidy(v)
