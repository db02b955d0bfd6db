# Per-block order statistics of a matrix whose rows and columns fall in groups:
# each block's largest and second largest off-diagonal entry in one pass over
# the n^2 entries (the NumPy way, a sort or several passes per statistic, costs
# seconds at n = 4,096). Driven by rankopt.probe.hierarchy.block_runner_up.

import numpy as np


def block_top_two(const double[:, ::1] m, const long long[::1] lab, Py_ssize_t groups):
    """``(top, second, count)``, each ``(groups, groups)``: per block of ``lab[i], lab[j]``.

    ``top``: the largest off-diagonal entry, ``second``: the largest once
    ``top`` is taken out (``top`` again when it occurs twice), ``count``: the
    entries. ``-inf`` where a block has too few entries. No NaN in ``m``, and
    every label in ``0 .. groups - 1`` (the caller checks both).
    """
    cdef Py_ssize_t n = m.shape[0], i, j, k, row
    top_np = np.full((groups, groups), -np.inf)
    second_np = np.full((groups, groups), -np.inf)
    count_np = np.zeros((groups, groups), dtype=np.int64)
    cdef double[:, ::1] top = top_np
    cdef double[:, ::1] second = second_np
    cdef long long[:, ::1] count = count_np
    cdef double v
    with nogil:
        for i in range(n):
            row = lab[i]
            for j in range(n):
                if j == i:
                    continue
                k = lab[j]
                v = m[i, j]
                count[row, k] += 1
                if v > top[row, k]:
                    second[row, k] = top[row, k]
                    top[row, k] = v
                elif v > second[row, k]:
                    second[row, k] = v
    return top_np, second_np, count_np
