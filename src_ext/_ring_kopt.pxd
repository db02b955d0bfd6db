# Header-only Lin-Kernighan move of the symmetric ring local search
# (_ring_search) built of sequential k-opt steps (k <= KOPT_MAX = 5): LKH's
# chain of basis moves with MOVE_TYPE = k. A step, from t1 and a link
# (t1, t2) that goes, chooses for i = 1 .. k - 1 a candidate t(2i+1) of
# t(2i) whose link keeps the partial gain G(i) positive and either tour
# neighbour t(2i+2) of it; at every i >= 2 it tries the closing link
# (t(2i), t1), and makes the first closing that both gains and gives one ring.
# The links removed and added so far need not form a ring before the step
# closes: a valid 5-opt move whose every 2- and 3-opt prefix splits the ring
# is found here, and not by the chain of 3-opt steps of _ring_lk. A step that
# finds no gaining closing makes the valid k-opt move of largest partial gain
# and the next step starts from its closing link (t1, t(2k)); the chain is
# taken back when no step closes with a gain.
#
# Validity is decided on the tour in O(k log k): the k removed links cut the
# ring into k runs; each t is an end of one run (a slot); the added links pair
# the slots; the move gives one ring when walking run, link, run, ... from
# one run visits all k before it comes back. A move is made with at most
# 2 (k - 1) flips (sorting the runs into their new order and orientation by
# reversals, each a 2-opt flip of _ring_common). From KOPT_VIRTUAL_N processes
# on, a chain's flips are made on a virtual tour (_ring_vtour: runs of the
# unchanged array), and only a chain that gains is made on the array, by
# replaying them; on smaller rings they are made on the array and taken back
# when the chain does not gain. Either way the moves kept are logged for undo
# as every other move.

from cython cimport floating
from _ring_common cimport Log, flip, log_reversal, reverse_path, undo_log
from _ring_moves cimport along, push
from _ring_vtour cimport VTour, vt_init, vt_pos, vt_pred, vt_reset, vt_reverse, vt_succ


cdef enum:
    KOPT_MAX = 5
    KOPT_CANDIDATES = 6  # candidates of each t(2i) a step tries (LKH's MAX_CANDIDATES)
    KOPT_MAX_STEPS = 8   # steps of a chain: 2 (KOPT_MAX - 1) flips each fit its undo log
    # from this many processes a chain's moves are made on a virtual tour (_ring_vtour):
    # CPU per kick on independent uniform weights (bench_ring_kicks.py --sections
    # flips), array / virtual: 0.69-0.91x at n = 1,024, 0.77-0.94x at 2,048, 0.99x at
    # 3,072, 0.94-1.11x at 4,096 (alpha candidates), 1.52x at 6,144, 1.96x at 8,192 and
    # 2.3-2.7x at 16,384 (ten nearest candidates, deeper chains)
    KOPT_VIRTUAL_N = 5120


# The search recurses once per tree node: it reads the (virtual) tour and the
# candidates through raw pointers kept in its state, and the weights through one
# pointer argument, rather than passing four memoryview slices down every call
# (with each node's tour neighbours read once, kicks ~7% cheaper at n = 1,024).


cdef struct KOptState:
    long long t[12]       # t[1] .. t[2k]; t[0] unused
    long long n
    long long K           # candidates per process in ``nb`` (the row stride of ``nbw``)
    long long kc          # of which a step tries the first kc
    long long kmax
    long long kclose      # the k of the move found
    double eps
    const double *nbw
    const long long *nb_p    # the candidates (n x K), raw
    long long evals          # closings priced
    # the validity check's working arrays: run of each slot, slot of each t
    long long key[6]
    long long lo[6]          # the end of each removed link that comes first in the forward tour
    long long order[6]
    long long slot_of[12]
    long long mate[12]
    long long run_first[6]   # first and last process of each run, in the forward tour
    long long run_last[6]
    long long seq[6]         # the runs after run 0 in the new ring, and their direction
    int fwd[6]
    double best_g            # the best valid full-depth move that does not gain: its G
    long long best_t[12]
    VTour vt                 # the tour with the chain's moves made so far
    bint virtual             # moves made on ``vt`` (else on the array, ``vt`` its view)


cdef inline bint kopt_valid(KOptState *st, long long k) noexcept nogil:
    """Whether removing (t1,t2), .., (t(2k-1),t(2k)) and adding (t2,t3), .., (t(2k),t1)
    gives one ring (the tour: ``st.vt``); fills the runs and ``seq`` / ``fwd`` (the new
    ring's runs after run 0, each walked forward or not) when it does."""
    cdef long long m, a, b, lo, j, x, cur, nxt, count, r, s, q, n = st.n
    # each removed link by the position of its first process in the forward tour
    for m in range(k):
        a = st.t[2 * m + 1]
        if st.vt.ident:
            q = st.vt.pos[a] + 1
            lo = a if st.vt.tour[0 if q == n else q] == st.t[2 * m + 2] else st.t[2 * m + 2]
            st.key[m] = st.vt.pos[lo]
        else:
            lo = a if vt_succ(&st.vt, a) == st.t[2 * m + 2] else st.t[2 * m + 2]
            st.key[m] = vt_pos(&st.vt, lo)
        st.lo[m] = lo
        st.order[m] = m
    for m in range(1, k):  # insertion sort of the links by key
        x = st.order[m]
        j = m - 1
        while j >= 0 and st.key[st.order[j]] > st.key[x]:
            st.order[j + 1] = st.order[j]
            j -= 1
        st.order[j + 1] = x
    # run r starts after sorted link r and ends before sorted link r + 1; slot 2r is
    # its first process, 2r + 1 its last
    for r in range(k):
        m = st.order[r]
        lo = st.lo[m]
        b = st.t[2 * m + 2] if st.t[2 * m + 1] == lo else st.t[2 * m + 1]
        # lo ends run r - 1, b starts run r
        s = r - 1 if r > 0 else k - 1
        st.run_first[r] = b
        st.run_last[s] = lo
        # t index of each end: 2m + 1 and 2m + 2 (1-based)
        if st.t[2 * m + 1] == lo:
            st.slot_of[2 * m + 1] = 2 * s + 1
            st.slot_of[2 * m + 2] = 2 * r
        else:
            st.slot_of[2 * m + 2] = 2 * s + 1
            st.slot_of[2 * m + 1] = 2 * r
    # the added links pair the slots: (t2, t3), .., (t(2k), t1)
    for m in range(1, k + 1):
        a = st.slot_of[2 * m]
        b = st.slot_of[2 * m + 1] if m < k else st.slot_of[1]
        st.mate[a] = b
        st.mate[b] = a
    cur = 1  # the last process of run 0
    count = 0
    while True:
        nxt = st.mate[cur]
        r = nxt >> 1
        if r == 0:
            return count == k - 1
        if count >= k - 1:
            return False
        st.seq[count] = r
        st.fwd[count] = (nxt & 1) == 0
        count += 1
        cur = nxt ^ 1


cdef inline void kopt_flip(long long[::1] tour, long long[::1] pos, KOptState *st, long long a,
                           long long b, long long c, long long d, Log *log) noexcept nogil:
    """``flip`` (_ring_common): links {a,b}, {c,d} become {a,c}, {b,d}, on the virtual
    tour or the array (``st.virtual``); the reversal is logged (``log`` has room: a
    chain's flips are bounded)."""
    cdef long long i, j
    if not st.virtual:
        flip(tour, pos, st.n, a, b, c, d, log)
        return
    if vt_succ(&st.vt, a) == b:
        i = vt_pos(&st.vt, b)
        j = vt_pos(&st.vt, c)
    else:
        i = vt_pos(&st.vt, a)
        j = vt_pos(&st.vt, d)
    vt_reverse(&st.vt, i, j)
    log.i[log.size] = i
    log.j[log.size] = j
    log.size += 1


cdef inline void kopt_make(long long[::1] tour, long long[::1] pos, KOptState *st, long long k,
                           Log *log) noexcept nogil:
    """Rearrange the runs 1 .. k - 1 into ``seq`` / ``fwd`` with 2-opt flips (see
    ``kopt_flip``)."""
    cdef long long t, u, v, a, b, c, d, x, y
    cdef long long lid[6]
    cdef long long lf[6]
    cdef long long ll[6]
    for t in range(k - 1):  # the runs in tour order after run 0, as they lie now
        lid[t] = t + 1
        lf[t] = st.run_first[t + 1]
        ll[t] = st.run_last[t + 1]
    for t in range(k - 1):
        u = t
        while lid[u] != st.seq[t]:
            u += 1
        a = st.run_last[0] if t == 0 else ll[t - 1]
        if u != t:
            b = lf[t]
            c = ll[u]
            d = st.run_first[0] if u == k - 2 else lf[u + 1]
            kopt_flip(tour, pos, st, a, b, c, d, log)
            v = u
            x = t
            while x < v:  # the runs t .. u in reverse order, each turned
                y = lid[x]
                lid[x] = lid[v]
                lid[v] = y
                y = lf[x]
                lf[x] = ll[v]
                ll[v] = y
                y = ll[x]
                ll[x] = lf[v]
                lf[v] = y
                x += 1
                v -= 1
            if x == v:
                y = lf[x]
                lf[x] = ll[x]
                ll[x] = y
        if (lf[t] == st.run_first[lid[t]]) != (st.fwd[t] != 0) and lf[t] != ll[t]:
            b = lf[t]
            c = ll[t]
            d = st.run_first[0] if t == k - 2 else lf[t + 1]
            kopt_flip(tour, pos, st, a, b, c, d, log)
            lf[t] = c
            ll[t] = b


cdef inline bint kopt_removed(KOptState *st, long long m, long long x, long long y) noexcept nogil:
    """Whether (x, y) is one of the first ``m`` removed or added links."""
    cdef long long j, a, b
    for j in range(1, m + 1):
        a = st.t[2 * j - 1]
        b = st.t[2 * j]
        if (a == x and b == y) or (a == y and b == x):
            return True
        if j < m:
            a = st.t[2 * j]
            b = st.t[2 * j + 1]
            if (a == x and b == y) or (a == y and b == x):
                return True
    return False


cdef inline double kopt_search(const floating *w, KOptState *st, long long i,
                               double g) noexcept nogil:
    """t1 .. t(2i) chosen with partial gain ``g`` (removed less added, the closing
    link left out): the gain of the first valid closing, its ring in ``st``, else 0.
    ``w`` is the weight matrix's first entry (row stride n)."""
    cdef long long K = st.K, n = st.n, kk, x, t2i = st.t[2 * i], t1 = st.t[1], t3, t4
    cdef long long s2i, p2i, q
    cdef double g1, close
    if i >= 2:
        st.evals += 1
        close = g - w[t1 * n + t2i]  # row t1: one row for the whole search, in cache
        if close > st.eps and kopt_valid(st, i):
            st.kclose = i
            return close
    if i >= st.kmax:
        if g > st.best_g and kopt_valid(st, i):
            st.best_g = g
            for x in range(1, 2 * i + 1):
                st.best_t[x] = st.t[x]
        return 0.0
    s2i = -1  # t2i's tour neighbours, read once a candidate keeps the gain (on a large
    p2i = -1  # ring both reads miss the cache, and most nodes end at their first candidate)
    for kk in range(st.kc):
        g1 = g - st.nbw[t2i * K + kk]
        if g1 <= st.eps:
            break
        t3 = st.nb_p[t2i * K + kk]
        if s2i < 0:
            if st.vt.ident:
                q = st.vt.pos[t2i]
                s2i = st.vt.tour[0] if q + 1 == n else st.vt.tour[q + 1]
                p2i = st.vt.tour[n - 1] if q == 0 else st.vt.tour[q - 1]
            else:
                s2i = vt_succ(&st.vt, t2i)
                p2i = vt_pred(&st.vt, t2i)
        if t3 == t1 or t3 == t2i or t3 == s2i or t3 == p2i:
            continue  # (t2i, t3) a link of the ring already
        if kopt_removed(st, i, t2i, t3):
            continue
        st.t[2 * i + 1] = t3
        q = st.vt.pos[t3] if st.vt.ident else -1
        for x in range(2):
            if q >= 0:
                if x == 0:
                    t4 = st.vt.tour[0] if q + 1 == n else st.vt.tour[q + 1]
                else:
                    t4 = st.vt.tour[n - 1] if q == 0 else st.vt.tour[q - 1]
            else:
                t4 = vt_succ(&st.vt, t3) if x == 0 else vt_pred(&st.vt, t3)
            if t4 == t2i or kopt_removed(st, i, t3, t4):
                continue
            st.t[2 * i + 2] = t4
            close = kopt_search(w, st, i + 1, g1 + w[t3 * n + t4])
            if close > 0.0:
                return close
    return 0.0


cdef inline double kopt_move(const floating[:, ::1] w, long long[::1] tour, long long[::1] pos,
                             const long long[:, ::1] nb, const double *nbw, long long n,
                             long long a, long long kmax, long long steps, long long *evals,
                             long long *queue, unsigned char *inq, long long *tail, Log *log,
                             double eps, long long virtual_n) noexcept nogil:
    """The first improving chain of sequential k-opt steps (k <= ``kmax`` <= KOPT_MAX,
    at most ``steps`` of them) that drops a link at ``a``; returns its delta or 0.

    A step that finds no gaining closing makes the valid k-opt move of largest
    partial gain and goes on from its closing link (LKH's chain of basis moves);
    the chain is taken back when no step closes with a gain. The chain's moves
    are made on a virtual tour; one that gains is made on ``tour`` / ``pos`` by
    replaying its flips (the same ring, positions and direction as making each
    move there) when the ring has at least ``virtual_n`` processes, else on the
    array, each flip taken back when the chain does not gain."""
    cdef KOptState st
    cdef Log chain
    cdef long long chain_i[2 * (KOPT_MAX - 1) * KOPT_MAX_STEPS]
    cdef long long chain_j[2 * (KOPT_MAX - 1) * KOPT_MAX_STEPS]
    cdef long long touched[2 * KOPT_MAX * KOPT_MAX_STEPS]
    cdef long long x, m, k, step, ntouched = 0
    cdef double r = 0.0, g
    if n < 2 * KOPT_MAX + 2:
        return 0.0
    st.n = n
    st.K = nb.shape[1]
    st.kc = st.K if st.K < KOPT_CANDIDATES else KOPT_CANDIDATES
    st.kmax = kmax if kmax <= KOPT_MAX else KOPT_MAX
    st.eps = eps
    st.nbw = nbw
    st.nb_p = &nb[0, 0]
    st.evals = 0
    vt_init(&st.vt, &tour[0], &pos[0], n)
    st.virtual = n >= virtual_n
    if steps > KOPT_MAX_STEPS:
        steps = KOPT_MAX_STEPS
    # the chain's flips, on the stack: a chain makes at most this many (2 (k - 1) a step)
    chain.enabled = True
    chain.size = 0
    chain.cap = 2 * (KOPT_MAX - 1) * KOPT_MAX_STEPS
    chain.i = chain_i
    chain.j = chain_j
    for x in range(2):
        st.t[1] = a
        st.t[2] = along(tour, pos, a, n, x)
        g = w[a, st.t[2]]
        ntouched = 0
        chain.size = 0
        for step in range(steps):
            st.best_g = eps
            r = kopt_search(&w[0, 0], &st, 1, g)
            if r > 0.0:
                k = st.kclose
                kopt_make(tour, pos, &st, k, &chain)
                for m in range(1, 2 * k + 1):
                    touched[ntouched] = st.t[m]
                    ntouched += 1
                break
            if step + 1 == steps or st.best_g <= eps:
                break
            k = st.kmax
            for m in range(1, 2 * k + 1):
                st.t[m] = st.best_t[m]
                touched[ntouched] = st.t[m]
                ntouched += 1
            kopt_valid(&st, k)
            kopt_make(tour, pos, &st, k, &chain)
            g = st.best_g
            st.t[2] = st.t[2 * k]  # the next step drops the closing link (t1, t(2k))
        if r > 0.0:
            for m in range(chain.size):
                if st.virtual:  # the virtual tour's flips, made on the array
                    reverse_path(tour, pos, chain.i[m], chain.j[m], n)
                if log.enabled:
                    log_reversal(log, chain.i[m], chain.j[m])
            for m in range(ntouched):
                push(queue, inq, tail, n, touched[m])
            evals[0] += st.evals
            return -r
        if st.virtual:
            vt_reset(&st.vt)
        else:
            undo_log(tour, pos, n, &chain)
    evals[0] += st.evals
    return 0.0
