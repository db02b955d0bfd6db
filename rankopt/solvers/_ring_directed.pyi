"""Stub of the compiled directed ring search (``src_ext/_ring_directed.pyx``)."""

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", np.float32, np.float64)

def directed_search(
    d: NDArray[_F],
    tour: NDArray[np.int64],
    nb: NDArray[np.int64],
    seed: int,
    max_kicks: int,
    time_limit: float = 0.0,
    window: int = 50,
) -> tuple[float, int, int, int, int]: ...
