"""Cost models: the modelled time of a collective algorithm under a rank order.

``make_model`` turns (matrix, collective, algorithm, objective, ...) into a
:class:`~rankopt.models.base.CostModel`; solvers see nothing else.

Objectives
----------
``"sum"``
    Ring algorithms only: total latency around the ring (latency-bound,
    pipelined regime). Default for rings when only latency is known.
``"bottleneck"``
    Ring algorithms only: slowest ring link (step-synchronous, latency only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError, check_options
from rankopt.models.base import CostModel
from rankopt.models.ring import RingBottleneck, RingSum

__all__ = ["CostModel", "make_model", "ALGORITHMS", "RING_OBJECTIVES", "default_objective"]

#: Valid algorithm names per collective.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring",),
    "allgather": ("ring",),
    "reduce_scatter": ("ring",),
}

RING_OBJECTIVES = ("sum", "bottleneck")


def default_objective(algorithm: str, *, bandwidth: Any = None, groups: Any = None) -> str:
    """The objective ``solve()`` uses when none is given (documented rule)."""
    return "sum"


def check_collective(collective: str, algorithm: str) -> None:
    """Raise a clear error for an unknown collective or algorithm."""
    check_options("collective", collective, tuple(ALGORITHMS))
    if algorithm not in ALGORITHMS[collective]:
        raise RankoptInputError(
            f"`algorithm` must be one of {', '.join(map(repr, ALGORITHMS[collective]))} "
            f"for collective {collective!r}; got {algorithm!r} instead."
        )


def make_model(
    latency: NDArray[np.float64],
    collective: str = "allreduce",
    algorithm: str = "ring",
    *,
    objective: str | None = None,
    bandwidth: Any = None,
    nbytes: float | None = None,
    groups: Any = None,
    uplink_bandwidth: Any = None,
) -> CostModel:
    """Build the cost model of ``collective``/``algorithm`` on a validated matrix."""
    check_collective(collective, algorithm)
    if objective is None:
        objective = default_objective(algorithm, bandwidth=bandwidth, groups=groups)
    check_options("objective", objective, RING_OBJECTIVES)
    if objective == "sum":
        return RingSum(latency)
    return RingBottleneck(latency)
