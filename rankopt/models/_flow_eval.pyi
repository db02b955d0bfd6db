"""Stub of the compiled flow-model evaluator (``src_ext/_flow_eval.pyx``)."""

import numpy as np
from numpy.typing import NDArray

class FlowEval:
    """The flow model of one schedule on one network; ``cost(order)`` runs it."""

    def __init__(
        self,
        lat: NDArray[np.float64],
        bw: NDArray[np.float64],
        has_bw: bool,
        capout: NDArray[np.float64],
        capin: NDArray[np.float64],
        nbytes: float,
        contention: bool,
        labels: NDArray[np.int64],
        uplink: NDArray[np.float64],
        uplink_in: NDArray[np.float64],
        src: NDArray[np.int64],
        dst: NDArray[np.int64],
        frac: NDArray[np.float64],
        dep_count: NDArray[np.int64],
        dnt_ptr: NDArray[np.int64],
        dnt_idx: NDArray[np.int64],
    ) -> None: ...
    def cost(self, order: NDArray[np.int64]) -> float:
        """Seconds until the last transfer ends under ``order``."""
