"""Stub of the compiled schedule evaluator (``src_ext/_schedule_eval.pyx``)."""

import numpy as np
from numpy.typing import NDArray

from rankopt.models._swap_eval import SwapEval

class StepEval(SwapEval):
    """Evaluator of one schedule on one network; caches the last order seen."""

    def __init__(
        self,
        lat: NDArray[np.float64],
        bw: NDArray[np.float64],
        has_bw: bool,
        nbytes: float,
        has_rate: bool,
        labels: NDArray[np.int64],
        uplink: NDArray[np.float64],
        uplink_in: NDArray[np.float64],
        share: NDArray[np.float64],
        crowd: NDArray[np.float64],
        tenant: NDArray[np.float64],
        tenant_in: NDArray[np.float64],
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        frac: NDArray[np.float64],
        step_ptr: NDArray[np.int64],
        repeat: NDArray[np.int64],
        tstep: NDArray[np.int64],
        rptr: NDArray[np.int64],
        rtr: NDArray[np.int64],
        bufsize: int,
    ) -> None: ...
    def step_times(self, order: NDArray[np.int64]) -> NDArray[np.float64]: ...

def chain_cost(
    lat: NDArray[np.float64],
    bw: NDArray[np.float64],
    has_bw: bool,
    c_full: float,
    c_last: float,
    order: NDArray[np.int64],
    nseg: int,
) -> float: ...
