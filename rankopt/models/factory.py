"""``make_model``: the cost model of an algorithm, objective and network.

The one place where (matrix, collective, algorithm, objective, ...) becomes a
:class:`~rankopt.models.base.CostModel`; :mod:`rankopt.models` re-exports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._limits import MAX_COUNT, check_bound, check_chain_segments
from rankopt._validation import RankoptInputError, check_options
from rankopt.models._algorithms import algorithm_spec
from rankopt.models.base import CostModel
from rankopt.models.network import check_groups, make_network
from rankopt.models.ring import RingBottleneck, RingSum
from rankopt.models.schedule import (
    DEFAULT_SEGMENT_SIZE,
    check_collective,
    ring_pattern,
    schedule,
)
from rankopt.models.step import HierarchicalModel, StepModel

__all__ = ["OBJECTIVES", "RING_OBJECTIVES", "default_objective", "make_model", "network_inputs"]

RING_OBJECTIVES = ("sum", "bottleneck")
OBJECTIVES = ("sum", "bottleneck", "time", "contention")


def default_objective(
    algorithm: str,
    *,
    bandwidth: Any = None,
    groups: Any = None,
    nbytes: Any = None,
    uplink_bandwidth: Any = None,
) -> str:
    """The objective ``solve()`` and ``cost()`` use when none is given (the documented rule).

    :func:`make_model` applies it, and :func:`~rankopt.models.evaluate.cost`
    calls it with its own arguments, so a result's cost and ``cost()`` of its
    order agree.

    1. ``groups``, ``uplink_bandwidth`` and ``nbytes`` all given:
       ``"contention"`` (the only model that sees shared uplinks);
    2. a ring algorithm without both ``bandwidth`` and ``nbytes``: ``"sum"``
       (only latency is known: the ring's total latency, as in the
       latency-bound regime; rotation invariant, solved exactly up to n=12);
    3. otherwise ``"time"``: the α-β schedule model, latency-only when
       ``bandwidth`` or ``nbytes`` is missing.

    Examples
    --------
    >>> default_objective("ring"), default_objective("ring", bandwidth=1e9, nbytes=1e6)
    ('sum', 'time')
    >>> default_objective("ring", groups=[0, 0, 1, 1], uplink_bandwidth=1e9, nbytes=1e6)
    'contention'
    """
    if groups is not None and uplink_bandwidth is not None and nbytes is not None:
        return "contention"
    if algorithm == "ring" and (bandwidth is None or nbytes is None):
        return "sum"
    return "time"


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
    segment_size: float | None = None,
    inter: str | None = None,
    workload: Any = None,
    straggle: Any = None,
    elastic: Any = None,
    traffic: Any = None,
) -> CostModel:
    """Build the cost model of ``collective``/``algorithm`` on a validated matrix.

    ``objective=None`` follows :func:`default_objective`. ``"time"`` without
    ``nbytes`` is latency-only (``bandwidth`` is then unused);
    ``"contention"`` requires ``groups``, ``uplink_bandwidth`` and ``nbytes``;
    ``straggle`` (default 1: an even split) is how the transfers of a step
    share an uplink (:attr:`rankopt.models.network.NetworkArrays.straggle`) and
    ``elastic`` (default 0) how much of other tenants' load yields to them
    (:func:`rankopt.models.network.tenant_flows`).
    Hierarchical allreduce takes its groups from the finest level of
    ``groups``, or from :func:`rankopt.infer_hierarchy` when none are given.

    With ``workload`` (a sequence of
    :class:`~rankopt.models.workload.PricedCall`), the model is the
    :class:`~rankopt.models.workload.WorkloadModel` of the mix: each call's
    algorithm at its own size (``collective``, ``algorithm`` and ``nbytes``
    are then not used), all with one objective: ``"contention"`` when
    ``groups`` and ``uplink_bandwidth`` are given, else ``"time"``.

    With ``traffic`` (a :class:`~rankopt.models.traffic.Traffic`), the job's
    point-to-point traffic is priced too
    (:class:`~rankopt.models.traffic.TrafficModel`, ``objective`` or by
    default ``"time"``): alone when there is no ``workload``, else as one
    more part of the mix (whose calls keep their own default objective).
    """
    if traffic is not None or workload is not None:
        mix = {
            "objective": objective,
            "bandwidth": bandwidth,
            "groups": groups,
            "uplink_bandwidth": uplink_bandwidth,
            "segment_size": segment_size,
            "inter": inter,
            "straggle": straggle,
            "elastic": elastic,
        }
        if traffic is not None:
            return _traffic_model(latency, traffic, workload, **mix)
        return _workload_model(latency, workload, **mix)
    algorithm = ring_pattern(collective, algorithm)
    check_collective(collective, algorithm)
    if objective is None:
        objective = default_objective(
            algorithm,
            bandwidth=bandwidth,
            groups=groups,
            nbytes=nbytes,
            uplink_bandwidth=uplink_bandwidth,
        )
    check_options("objective", objective, OBJECTIVES)
    n = latency.shape[0]
    if objective in RING_OBJECTIVES:
        if algorithm != "ring":
            raise RankoptInputError(
                f"objective {objective!r} applies to ring algorithms only; use objective='time' "
                f"for {collective!r}/{algorithm!r}."
            )
        return RingSum(latency) if objective == "sum" else RingBottleneck(latency)
    if objective == "contention":
        _contention_needs(groups=groups, uplink_bandwidth=uplink_bandwidth, nbytes=nbytes)
        net = make_network(
            latency,
            bandwidth=bandwidth,
            nbytes=nbytes,
            groups=groups,
            uplink_bandwidth=uplink_bandwidth,
            straggle=1.0 if straggle is None else straggle,
            elastic=0.0 if elastic is None else elastic,
        )
    else:
        net = make_network(
            latency, bandwidth=bandwidth if nbytes is not None else None, nbytes=nbytes
        )
    kind = algorithm_spec(collective, algorithm).model
    if kind == "hierarchical":
        if groups is not None:
            finest = check_groups(groups, n)[0]
        else:
            from rankopt.probe.hierarchy import infer_hierarchy

            levels = infer_hierarchy(latency, net.bandwidth if bandwidth is not None else None)
            finest = levels[0] if levels else np.arange(n, dtype=np.int64)
        return HierarchicalModel(
            net, finest, objective, inter=inter, collective=collective, algorithm=algorithm
        )
    if kind == "chain":  # the segment count is checked before schedule() allocates it
        check_chain_segments(
            nbytes, segment_size, f"{collective}/{algorithm}", default=DEFAULT_SEGMENT_SIZE
        )
    sched = schedule(collective, algorithm, n, nbytes=nbytes, segment_size=segment_size)
    if kind == "chain" and not net.levels:
        from rankopt.models.chain import ChainTime

        return ChainTime(sched, net, objective)
    if kind == "concurrent":
        from rankopt.models.concurrent import ConcurrentTime

        return ConcurrentTime(sched, net, objective)
    if kind == "flow":
        from rankopt.models.flow import FlowTime

        return FlowTime(sched, net, objective)
    if kind == "pairwise" and not net.levels:
        from rankopt.models.pairwise import PairwiseTime

        return PairwiseTime(sched, net, objective)
    return StepModel(sched, net, objective)


def _workload_model(latency, workload, *, objective, bandwidth, groups, uplink_bandwidth, **kw):
    from rankopt.models.workload import WorkloadModel

    if objective is None:
        objective = "contention" if groups is not None and uplink_bandwidth is not None else "time"
    if objective in RING_OBJECTIVES:
        raise RankoptInputError(
            f"objective {objective!r} prices one ring; a workload is priced with 'time' or "
            "'contention'."
        )
    for k, call in enumerate(workload):
        check_bound(
            call.count, "count", MAX_COUNT, f"workload call {k} ({call.collective})",
            minimum=0, hint="a workload entry counts the calls of one job",
        )  # fmt: skip
    parts = [
        (
            call.count,
            make_model(
                latency,
                call.collective,
                call.algorithm,
                objective=objective,
                bandwidth=bandwidth,
                nbytes=call.nbytes,
                groups=groups,
                uplink_bandwidth=uplink_bandwidth,
                **kw,
            ),
        )
        for call in workload
    ]
    return WorkloadModel(parts)


def _traffic_model(
    latency, traffic, workload, *, objective, bandwidth, groups, uplink_bandwidth, **kw
):
    """The traffic's model, alone or beside the workload's calls (one objective)."""
    from rankopt.models.traffic import TrafficModel, as_traffic
    from rankopt.models.workload import WorkloadModel

    n = latency.shape[0]
    traffic = as_traffic(traffic, n)
    calls_objective = objective  # the calls' own default when None
    if objective is None:
        objective = "time"  # see TrafficModel: "contention" assumes one phase
    if objective not in ("time", "contention"):
        raise RankoptInputError(
            f"objective {objective!r} prices collectives only; point-to-point traffic is "
            "priced with 'time' or 'contention'."
        )
    if objective == "contention":
        _contention_needs(groups=groups, uplink_bandwidth=uplink_bandwidth)
    net = make_network(
        latency,
        bandwidth=bandwidth,
        nbytes=1.0,  # traffic carries its own bytes; the uplinks are rates
        groups=groups if objective == "contention" else None,
        uplink_bandwidth=uplink_bandwidth if objective == "contention" else None,
    )
    part = TrafficModel(
        latency,
        traffic,
        bandwidth=net.bandwidth,
        groups=list(net.labels) if objective == "contention" else groups,
        uplink=net.uplink if objective == "contention" else None,
        uplink_in=net.uplink_in if objective == "contention" else None,
        objective=objective,
    )
    if workload is None or len(workload) == 0:
        return part
    calls = _workload_model(
        latency, workload, objective=calls_objective, bandwidth=bandwidth, groups=groups,
        uplink_bandwidth=uplink_bandwidth, **kw,
    )  # fmt: skip
    return WorkloadModel([*calls.parts, (1.0, part)])


def _contention_needs(**given: Any) -> None:
    """Refuse the contention objective without the inputs it prices, naming the missing."""
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise RankoptInputError(
            f"objective 'contention' needs {', '.join(f'`{m}`' for m in missing)}."
        )


def network_inputs(
    network: Any,
    algorithm: str,
    *,
    objective: Any = None,
    nbytes: float | None = None,
    bandwidth: Any = None,
    groups: Any = None,
    uplink_bandwidth: Any = None,
    straggle: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """``make_model``'s keywords (``objective`` included) for a :class:`rankopt.Network`,
    and notes: what :func:`rankopt.solve` and :func:`rankopt.cost` price on a network.

    Anything given wins; what it leaves out comes from the network
    (:meth:`rankopt.Network.default_model`): contention with the inferred
    uplinks when the network has bandwidth and a hierarchy.
    """
    notes: list[str] = []
    if objective is None:
        objective = network.default_model(algorithm, nbytes)["objective"]
    kw: dict[str, Any] = {
        "objective": objective,
        "bandwidth": bandwidth,
        "nbytes": nbytes,
        "groups": groups,
        "uplink_bandwidth": uplink_bandwidth,
        "straggle": straggle,
        "elastic": None,
    }
    if callable(objective) or objective in RING_OBJECTIVES:
        if network.bandwidth is not None:
            notes.append(
                f"bandwidth measured but not used: objective {objective!r} sees latency only"
            )
        return {**kw, "bandwidth": None, "groups": None, "uplink_bandwidth": None}, notes
    if kw["nbytes"] is None and (network.bandwidth is not None or objective == "contention"):
        from rankopt.network.core import DEFAULT_NBYTES

        kw["nbytes"] = DEFAULT_NBYTES
    if kw["bandwidth"] is None and network.bandwidth is not None and kw["nbytes"] is not None:
        kw["bandwidth"] = network.bandwidth
    if objective == "contention":
        if kw["groups"] is None:
            kw["groups"] = list(network.groups) or None
            ups = kw["uplink_bandwidth"]
            if isinstance(ups, (list, tuple)) and len(ups) not in (1, len(network.groups)):
                from rankopt.network.core import describe_levels

                raise RankoptInputError(
                    f"`uplink_bandwidth` gives {len(ups)} values, but the network has "
                    f"{len(network.groups)} levels ({describe_levels(network.groups)}): give "
                    "one value for all of them or one per level, finest first."
                )
        if kw["uplink_bandwidth"] is None and network.has_uplinks and groups is None:
            kw["uplink_bandwidth"] = [np.asarray(u) for u in network.uplinks]
        if kw["straggle"] is None:
            kw["straggle"] = network.straggle
        if kw["uplink_bandwidth"] is not None and uplink_bandwidth is None:
            kw["elastic"] = network.elastic  # the tenants measured on the network's own uplinks
    else:
        kw["groups"] = kw["uplink_bandwidth"] = None
        if network.has_uplinks and network.bandwidth is not None:
            notes.append(
                f"hierarchy found but not used: objective {objective!r} has no shared uplinks"
            )
    if network.bandwidth is None:
        notes.append("no bandwidth measured: the model sees latency only")
    return kw, notes
