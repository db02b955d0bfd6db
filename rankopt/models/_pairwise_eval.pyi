"""Stub of the compiled pairwise all-to-all evaluator (``src_ext/_pairwise_eval.pyx``)."""

import numpy as np
from numpy.typing import NDArray

from rankopt.models._swap_eval import SwapEval

class PairwiseEval(SwapEval):
    """Evaluator of pairwise all-to-all; caches the last order seen."""

    def __init__(self, T: NDArray[np.float64], TT: NDArray[np.float64], xor: bool) -> None: ...
    def step_times(self, order: NDArray[np.int64]) -> NDArray[np.float64]: ...
