"""Matrices and checks shared by the tests of the ring kernels."""

from __future__ import annotations

import numpy as np


def uniform(n: int, seed: int, dtype: type = np.float64) -> np.ndarray:
    """Symmetric matrix of independent uniform [0, 1) weights, zero diagonal.

    >>> w = uniform(4, 0)
    >>> bool((w == w.T).all() and (np.diag(w) == 0).all())
    True
    """
    m = np.random.default_rng(seed).random((n, n))
    m = np.triu(m, 1)
    return np.ascontiguousarray(m + m.T, dtype=dtype)


def is_perm(tour: np.ndarray, n: int) -> bool:
    """Whether ``tour`` holds every process 0 .. n - 1 once."""
    return sorted(np.asarray(tour).tolist()) == list(range(n))
