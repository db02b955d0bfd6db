"""Stub of the compiled ring constructions (``src_ext/_ring_construct.pyx``)."""

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", np.float32, np.float64)

def nearest_neighbor(w: NDArray[_F], start: int) -> NDArray[np.int64]: ...
def greedy_edge(
    w: NDArray[_F], src: NDArray[np.int64], dst: NDArray[np.int64]
) -> NDArray[np.int64]: ...
