"""Stub of the compiled candidate lists of the ring searches (``src_ext/_ring_candidates.pyx``)."""

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", np.float32, np.float64)

def knn_lists(w: NDArray[_F], k: int) -> NDArray[np.int64]: ...
def alpha_candidates(
    w: NDArray[_F], k: int, iterations: int = 50, sparse: int = 0, time_limit: float = 0.0
) -> tuple[NDArray[np.int64], NDArray[np.float64], float]: ...
