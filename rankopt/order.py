"""Rank orders: ``order[k]`` is the original rank of the process that gets new rank ``k``."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import check_order

__all__ = ["invert", "check_order", "identity"]


def invert(order: ArrayLike) -> NDArray[np.int64]:
    """Return ``rank_of`` with ``rank_of[order[k]] == k``.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        A permutation of ``range(n)``.

    Returns
    -------
    rank_of : ndarray of int64
        The new rank of each original process.

    Examples
    --------
    >>> invert([2, 0, 1])
    array([1, 2, 0])
    """
    arr = check_order(order, len(np.asarray(order)))
    rank_of = np.empty_like(arr)
    rank_of[arr] = np.arange(arr.size, dtype=np.int64)
    return rank_of


def identity(n: int) -> NDArray[np.int64]:
    """The launch order ``0, 1, ..., n-1``."""
    return np.arange(n, dtype=np.int64)
