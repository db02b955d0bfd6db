"""A start for dense traffic: the Frank–Wolfe relaxation of the mapping problem.

The α-β time of a traffic under an order, ``sum_ab A[a, b] B[o(a), o(b)]``
summed over its terms (messages priced by latency, bytes by the inverse
bandwidth), is a quadratic assignment: with the permutation matrix
``P[a, o(a)] = 1`` it reads ``f(P) = sum_k <A_k P B_k^T, P> (+ <C, P>)``.
Relaxed to doubly stochastic matrices, it is minimised by Frank–Wolfe from
the barycentre (the FAQ algorithm of Vogelstein et al., 2015, which
``scipy.optimize.quadratic_assignment`` implements): each step solves a
linear assignment on the gradient, moves towards that permutation by the
exact line search of the quadratic, and the last matrix is projected on the
nearest permutation (another linear assignment).

A step costs two dense matrix products per term (four when a matrix is not
symmetric) and one linear assignment (:func:`scipy.optimize.linear_sum_assignment`,
most of a step): :math:`O(n^3)`. The assignment is solved on the gradient less
its column means: the same optimum, found in 2 ms where the gradient itself took
11 ms at n = 256 (its rows are near copies of each other when every rank talks to
every other). The line search needs
no product of its own: with ``G`` the gradient at ``P`` and ``Q`` the
assignment's permutation, ``f(P + a (Q - P))`` has the linear coefficient
``<G, Q> - 2 f(P)`` and the quadratic one ``f(Q) - <G, Q> + f(P)`` (for the
quadratic part; a linear term adds its own), and ``f(Q)`` is a gather.

On dense traffic, where every rank talks to most others, the descent of
swaps from a partition or a greedy start ends 0.1% above FAQ at FAQ's time;
from this start it ends below FAQ's order (``bench/bench_custom_qap.py``).
On sparse traffic (stencils) FAQ's orders cost far more than the
partitions' and the start is not made: ``map`` asks for it where at least
:data:`rankopt.solvers.mapping.RELAX_DENSITY` of the pairs communicate, from
:data:`~rankopt.solvers.mapping.RELAX_MIN_N` to
:data:`~rankopt.solvers.mapping.RELAX_MAX_N` processes.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import NDArray

__all__ = ["relaxed_order"]

_F = NDArray[np.float64]


def relaxed_order(
    terms: list[tuple[_F, _F]],
    linear: _F | None,
    iters: int,
    tol: float,
    deadline: float | None = None,
) -> tuple[NDArray[np.int64], int]:
    """The permutation of Frank–Wolfe on ``sum_k <A_k P B_k^T, P> + <linear, P>``.

    ``terms``: pairs ``(A, B)`` of ``n x n`` finite matrices; ``linear``: an
    ``n x n`` matrix or None. At most ``iters`` steps, fewer when a step moves
    ``P`` by less than ``tol`` (Frobenius norm over ``sqrt(n)``, SciPy's rule)
    or the line search stays put, or once ``time.perf_counter()`` passes
    ``deadline``. Returns ``order`` (``order[a]`` the column of row ``a``)
    and the steps taken.

    Examples
    --------
    >>> a = np.array([[0.0, 5.0, 0.0], [5.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    >>> b = np.array([[0.0, 1.0, 9.0], [1.0, 0.0, 9.0], [9.0, 9.0, 0.0]])
    >>> order, _ = relaxed_order([(a, b)], None, 30, 0.03)
    >>> float((a * b[np.ix_(order, order)]).sum())
    28.0
    """
    from scipy.optimize import linear_sum_assignment

    n = terms[0][0].shape[0]
    sym = [bool(np.array_equal(a, a.T) and np.array_equal(b, b.T)) for a, b in terms]
    p = np.full((n, n), 1.0 / n)
    steps = 0
    while steps < iters:
        steps += 1
        grad = np.zeros((n, n)) if linear is None else linear.copy()
        quad_p = 0.0  # the quadratic part of f(P)
        for (a, b), s in zip(terms, sym, strict=True):
            g1 = (a @ p) @ b.T
            quad_p += float(np.vdot(g1, p))
            grad += 2.0 * g1 if s else g1 + (a.T @ p) @ b
        # the same assignment as on ``grad`` (a constant per column adds the same to
        # every one), found 5x faster: the gradient's rows are near copies of each other
        rows, cols = linear_sum_assignment(grad - grad.mean(axis=0))
        quad_q = sum(float((a * b[np.ix_(cols, cols)]).sum()) for a, b in terms)
        grad_q = float(grad[rows, cols].sum())
        lin_q = 0.0 if linear is None else float(linear[rows, cols].sum())
        # f(P + x R) = f(P) + x * slope + x^2 * curve, R = Q - P
        slope = grad_q - float(np.vdot(grad, p))
        curve = quad_q - (grad_q - lin_q) + quad_p
        if curve > 0.0:
            x = min(max(-slope / (2.0 * curve), 0.0), 1.0)
        else:
            x = 1.0 if slope + curve < 0.0 else 0.0
        if x <= 0.0:
            break
        # ||x R||_F, with ||Q - P||^2 = ||P||^2 - 2 <P, Q> + n
        change = x * np.sqrt(max(float(np.vdot(p, p)) - 2.0 * float(p[rows, cols].sum()) + n, 0.0))
        p *= 1.0 - x
        p[rows, cols] += x
        if change / np.sqrt(n) < tol:
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
    _, order = linear_sum_assignment(-p)
    return np.asarray(order, dtype=np.int64), steps
