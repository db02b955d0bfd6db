# A binary min-heap of (key, a, b) entries in three parallel arrays, header-only:
# the flow model's water-filling (_flow_eval) and the sparse spanning trees of the
# candidate lists (_ring_candidates) share it. ``n`` points to the entry count.


cdef inline void heap_push(double *hkey, long long *ha, long long *hb, Py_ssize_t *n,
                           double key, long long a, long long b) noexcept nogil:
    """Add (key, a, b)."""
    cdef Py_ssize_t i = n[0], up
    n[0] += 1
    while i > 0:
        up = (i - 1) >> 1
        if hkey[up] <= key:
            break
        hkey[i] = hkey[up]
        ha[i] = ha[up]
        hb[i] = hb[up]
        i = up
    hkey[i] = key
    ha[i] = a
    hb[i] = b


cdef inline void heap_pop(double *hkey, long long *ha, long long *hb,
                          Py_ssize_t *n) noexcept nogil:
    """Drop the smallest entry (read it from index 0 first)."""
    cdef Py_ssize_t last = n[0] - 1, i = 0, k
    cdef double key = hkey[last]
    cdef long long a = ha[last], b = hb[last]
    n[0] = last
    while True:
        k = 2 * i + 1
        if k >= last:
            break
        if k + 1 < last and hkey[k + 1] < hkey[k]:
            k += 1
        if hkey[k] >= key:
            break
        hkey[i] = hkey[k]
        ha[i] = ha[k]
        hb[i] = hb[k]
        i = k
    if last > 0:
        hkey[i] = key
        ha[i] = a
        hb[i] = b
