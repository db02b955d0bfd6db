"""Stub of the compiled base of the cost-model evaluators (``src_ext/_swap_eval.pyx``)."""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

class SwapEval:
    """Cached order and Python API shared by the cost-model evaluators."""

    @property
    def incremental(self) -> bool: ...
    def cost(self, order: NDArray[np.int64]) -> float: ...
    def batch_cost(self, orders: NDArray[np.int64]) -> NDArray[np.float64]: ...
    def swap_delta(self, order: NDArray[np.int64], i: int, j: int) -> float: ...
    def swap_deltas(
        self, order: NDArray[np.int64], pairs: NDArray[np.int64]
    ) -> NDArray[np.float64]: ...
    def search(
        self,
        order: NDArray[np.int64],
        seed: int,
        max_moves: int,
        time_limit: float,
        fixed0: bool,
        rel_tol: float,
    ) -> tuple[int, int, int]: ...
    def guided(
        self,
        order: NDArray[np.int64],
        seed: int,
        max_evals: int,
        time_limit: float,
        fixed0: bool,
        rel_tol: float,
        patience: int,
        kick: int,
        pptr: NDArray[np.int64],
        pidx: NDArray[np.int64],
        pcum: NDArray[np.float64],
        labels: NDArray[np.int64],
        gptr: NDArray[np.int64],
        gmem: NDArray[np.int64],
        lcum: NDArray[np.float64],
        p_random: float,
        p_bring: float,
        ties: bool,
    ) -> tuple[int, int, int]: ...

class SwapSum(SwapEval):
    """The weighted sum of evaluators over one set of processes (a workload of calls)."""

    def __init__(self, parts: Sequence[SwapEval], weights: Sequence[float]) -> None: ...
