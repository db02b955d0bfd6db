"""Stub of the compiled base of the cost-model evaluators (``src_ext/_swap_eval.pyx``)."""

import numpy as np
from numpy.typing import NDArray

class SwapEval:
    """Cached order and Python API shared by the cost-model evaluators."""

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
