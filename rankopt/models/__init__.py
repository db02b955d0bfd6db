"""Cost models: the modelled time of a collective algorithm under a rank order.

``make_model`` turns (matrix, collective, algorithm, objective, ...) into a
:class:`~rankopt.models.base.CostModel`; solvers see nothing else of it than
its methods and the :class:`~rankopt.models.base.Capabilities` it declares.
:func:`~rankopt.models.evaluate.cost` evaluates one order,
:func:`~rankopt.models.schedule.schedule` shows the steps behind a model.

Objectives
----------
``"sum"``
    Ring algorithms only: total latency around the ring (latency-bound,
    pipelined regime).
``"bottleneck"``
    Ring algorithms only: slowest ring link (step-synchronous, latency only).
``"time"``
    Any algorithm: α-β step-synchronous time of its schedule,
    ``sum over steps of max over transfers (latency + bytes / bandwidth)``;
    latency only when ``bandwidth`` or ``nbytes`` is missing.
``"contention"``
    ``"time"`` plus shared uplinks: needs ``groups``, ``uplink_bandwidth``
    and ``nbytes``.

Two algorithms have no steps, and their models say what they do instead
under both objectives: the all-at-once all-to-all (``"linear"``,
:mod:`rankopt.models.concurrent`: the busiest link's time) and Gloo's
broadcast (``"binomial_gloo"``, :mod:`rankopt.models.flow`: every send posted
once its data is there, concurrent flows sharing links max-min fairly).

Algorithms
----------
Each algorithm is one :class:`~rankopt.models._algorithms.Algorithm` (its step
generator, closed form, invariances and pricing model), registered with
:func:`register_algorithm`; :data:`ALGORITHMS` lists the registered names per
collective and :data:`ALGORITHM_SPECS` holds the specs.
"""

from __future__ import annotations

from rankopt.models._algorithms import (
    ALGORITHM_SPECS,
    Algorithm,
    Layout,
    Step,
    algorithm_spec,
    register_algorithm,
)
from rankopt.models.base import Capabilities, CostModel
from rankopt.models.custom import CustomModel
from rankopt.models.evaluate import cost
from rankopt.models.factory import OBJECTIVES, RING_OBJECTIVES, default_objective, make_model
from rankopt.models.schedule import ALGORITHMS, Schedule, check_collective, schedule

__all__ = [
    "CostModel",
    "Capabilities",
    "CustomModel",
    "make_model",
    "ALGORITHMS",
    "ALGORITHM_SPECS",
    "Algorithm",
    "Step",
    "Layout",
    "algorithm_spec",
    "register_algorithm",
    "OBJECTIVES",
    "RING_OBJECTIVES",
    "default_objective",
    "check_collective",
    "schedule",
    "Schedule",
    "cost",
]
