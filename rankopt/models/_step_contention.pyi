"""Stub of the compiled shared-uplink swap evaluator (``src_ext/_step_contention.pyx``)."""

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt.models._swap_eval import SwapEval

class StepContention(SwapEval):
    """Swap deltas (and full cost, through ``full``) of a schedule with shared uplinks."""

    full: Any
    def __init__(
        self,
        full: Any,
        lat: NDArray[np.float64],
        bw: NDArray[np.float64],
        has_bw: bool,
        labels: NDArray[np.int64],
        uplink: NDArray[np.float64],
        uplink_in: NDArray[np.float64],
        share: NDArray[np.float64],
        tenant: NDArray[np.float64],
        tenant_in: NDArray[np.float64],
        gptr: NDArray[np.int64],
        gmem: NDArray[np.int64],
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        step_ptr: NDArray[np.int64],
        c: NDArray[np.float64],
        reps: NDArray[np.float64],
        sptr: NDArray[np.int64],
        sidx: NDArray[np.int64],
        rptr: NDArray[np.int64],
        ridx: NDArray[np.int64],
        kptr: NDArray[np.int64],
        klist: NDArray[np.int64],
        maxe: int,
    ) -> None: ...
    def step_times(self, order: NDArray[np.int64]) -> NDArray[np.float64]: ...
    def state_cost(self, order: NDArray[np.int64]) -> float: ...
