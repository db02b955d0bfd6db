"""Stub of the compiled exact ring solver (``src_ext/_exact.pyx``)."""

from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", np.float32, np.float64)

def held_karp(w: NDArray[_F]) -> tuple[float, NDArray[np.int64]]: ...
