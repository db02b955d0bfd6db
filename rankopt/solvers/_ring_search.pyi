"""Stub of the compiled symmetric ring local search (``src_ext/_ring_search.pyx``)."""

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from rankopt.solvers._ring_candidates import alpha_candidates as alpha_candidates
from rankopt.solvers._ring_candidates import knn_lists as knn_lists
from rankopt.solvers._ring_construct import greedy_edge as greedy_edge
from rankopt.solvers._ring_construct import nearest_neighbor as nearest_neighbor

_F = TypeVar("_F", np.float32, np.float64)

KOPT_VIRTUAL_N: int

def matrix_tolerance(w: NDArray[_F]) -> float: ...
def local_search(
    w: NDArray[_F],
    tour: NDArray[np.int64],
    nb: NDArray[np.int64],
    use_or: bool = True,
    time_limit: float = 0.0,
    max_moves: int = 0,
    eps: float = 0.0,
    breadth: int = 1,
    breadth2: int = 1,
    kopt: int = 0,
    kopt_steps: int = 5,
    virtual_n: int = -1,
) -> tuple[float, int, int, int]: ...
def iterated_local_search(
    w: NDArray[_F],
    tour: NDArray[np.int64],
    nb: NDArray[np.int64],
    seed: int,
    max_kicks: int,
    time_limit: float = 0.0,
    window: int = 50,
    callback: Callable[[int, float], object] | None = None,
    report_every: int = 0,
    eps: float = 0.0,
    kick: int = 0,
    accept: float = 0.0,
    bridge_share: float = 0.3,
    pass_every: int = 0,
    breadth: int = 1,
    breadth2: int = 1,
    kopt: int = 0,
    kopt_steps: int = 5,
    virtual_n: int = -1,
) -> tuple[float, int, int, int, int]: ...
def long_link_exchanges(
    w: NDArray[_F], tour: NDArray[np.int64], links: int, eps: float = 0.0, max_moves: int = 0
) -> tuple[float, int, int]: ...
def window_link_ratio(
    w: NDArray[_F], tour: NDArray[np.int64], window: int, seed: int, samples: int = 256
) -> float: ...
def vtour_mismatches(
    tour: NDArray[np.int64], flips: NDArray[np.int64], reset_every: int = 0
) -> tuple[int, int, NDArray[np.int64]]: ...
