"""Stub of the compiled ring annealer (``src_ext/_anneal_ring.pyx``)."""

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", np.float32, np.float64)

def sample_deltas(
    w: NDArray[_F], tour: NDArray[np.int64], nb: NDArray[np.int64], seed: int, count: int
) -> NDArray[np.float64]: ...
def anneal(
    w: NDArray[_F],
    tour: NDArray[np.int64],
    nb: NDArray[np.int64],
    seed: int,
    max_iter: int,
    t0: float,
    t1: float,
    time_limit: float = 0.0,
    callback: Callable[[int, float], object] | None = None,
    report_every: int = 0,
) -> tuple[float, int, int, int, int]: ...
