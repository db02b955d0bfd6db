"""The probe's schedule and cost for a job, without running it (``rankopt probe --plan``).

Contents
--------
plan_probe
    Build the schedule the probe would run on ``n`` processes -- latency
    rounds, bandwidth slots by stage -- and estimate its duration from a link
    rate and a latency matrix.
ProbePlan
    The result: counts, bytes, seconds; ``to_dict()`` for JSON.
calibrate_step_overhead
    The per-step overhead a finished probe showed on its machines, to plan a
    larger job on the same kind of machines with.

The linear schedule is adaptive (later stages depend on the rates found), so
the plan runs :class:`~rankopt.probe.linear.LinearPlanner` against a model of
the network: ``bandwidth`` when given, else ``link_rate`` for every pair.
With uniform rates that is the schedule of a network whose groups show only
in latency (or nowhere); every bandwidth tier found inside a domain adds at
most ``2 (H_d - 1)`` slots (see :mod:`rankopt.probe.linear`).

Cost model
----------
One exchange of ``b`` bytes between ``a`` and ``c`` costs
``b / rate[a, c] + latency[a, c] + latency[c, a]`` (the message and its
acknowledgement; a ping-pong is two latencies). A pair exchanges
``warmup + repeats`` times in each direction, one direction after the other.
A round or slot lasts as long as its slowest pair, plus one consensus
(an allreduce of 16 bytes: ``2 ceil(log2 n)`` median latencies) and a fixed
``step_overhead`` per step for the processes' own work (Python, the MPI
progress engine). Every phase and bandwidth stage ends with an allgather of
``n (3 n + 1)`` doubles (ring: ``(n - 1)`` latencies plus the bytes at
``link_rate``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._common import ProbeParams, resolve_bandwidth_mode
from rankopt.probe._engine import RECHECK_PASSES, recheck_pairs
from rankopt.probe._topology import infer_link_levels
from rankopt.probe.linear import LinearPlanner
from rankopt.probe.schedule import bandwidth_slots, partner_table, round_robin

__all__ = [
    "ProbePlan",
    "plan_probe",
    "calibrate_step_overhead",
    "DEFAULT_LINK_RATE",
    "STEP_OVERHEAD",
]

_PARAM_FIELDS = tuple(f.name for f in fields(ProbeParams))
#: 25 Gbit/s in bytes/s.
DEFAULT_LINK_RATE = 25e9 / 8
#: Seconds of the processes' own work per round or slot (calibrated on loopback MPI).
STEP_OVERHEAD = 1.5e-4


@dataclass(frozen=True)
class ProbePlan:
    """What a probe of one job would do and how long it would take.

    Attributes
    ----------
    n, hosts : int
        Processes and hosts.
    mode : str
        ``"linear"``, ``"all-pairs"`` or ``"none"`` (latency only).
    latency_rounds : int
        Rounds of the latency phase.
    bandwidth_slots : int
        Slots of the bandwidth phase, all stages together.
    bandwidth_stages : list of (str, int)
        Name and slot count of every bandwidth stage, in order.
    latency_transfers, bandwidth_transfers : int
        Timed and warm-up messages of each phase (acknowledgements not
        counted).
    bytes : int
        Payload bytes of all those messages.
    latency_seconds, bandwidth_seconds, control_seconds, estimated_seconds : float
        Estimated time in the pair exchanges of each phase, in consensus,
        overheads and gathers, and in all.
    link_rate : float
        Bytes/s assumed where no bandwidth matrix was given.
    levels : list of int
        Number of groups per level the plan found (hosts first).
    """

    n: int
    hosts: int
    mode: str
    latency_rounds: int
    bandwidth_slots: int
    bandwidth_stages: list[tuple[str, int]]
    latency_transfers: int
    bandwidth_transfers: int
    bytes: int
    latency_seconds: float
    bandwidth_seconds: float
    control_seconds: float
    estimated_seconds: float
    link_rate: float
    levels: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dictionary of every attribute."""
        out = asdict(self)
        out["bandwidth_stages"] = [list(s) for s in self.bandwidth_stages]
        return out

    def __str__(self) -> str:
        stages = ", ".join(f"{name} {s}" for name, s in self.bandwidth_stages) or "none"
        return "\n".join(
            [
                f"probe plan: {self.n} processes on {self.hosts} host(s), "
                f"bandwidth mode {self.mode}, link rate {self.link_rate * 8 / 1e9:.3g} Gbit/s",
                f"  latency:   {self.latency_rounds} rounds, {self.latency_transfers} messages, "
                f"{self.latency_seconds:.3g} s",
                f"  bandwidth: {self.bandwidth_slots} slots ({stages}), "
                f"{self.bandwidth_transfers} transfers, {self.bandwidth_seconds:.3g} s",
                f"  control:   consensus, overheads and gathers {self.control_seconds:.3g} s",
                f"  total:     {self.bytes / 1e9:.3g} GB moved, "
                f"estimated {self.estimated_seconds:.3g} s",
                f"  groups per level: {self.levels}",
            ]
        )


def _slot_time(
    slot: Sequence[tuple[int, int]],
    nbytes: int,
    count: int,
    rate: NDArray[np.float64],
    lat: NDArray[np.float64],
) -> float:
    if not slot:
        return 0.0
    a = np.array([p[0] for p in slot])
    b = np.array([p[1] for p in slot])
    one = nbytes / rate[a, b] + lat[a, b] + lat[b, a]
    back = nbytes / rate[b, a] + lat[a, b] + lat[b, a]
    return float(np.max(count * (one + back)))


def plan_probe(
    latency: ArrayLike,
    hosts: Sequence[str],
    *,
    params: ProbeParams | None = None,
    mode: str = "auto",
    link_rate: float = DEFAULT_LINK_RATE,
    bandwidth: ArrayLike | None = None,
    step_overhead: float = STEP_OVERHEAD,
) -> ProbePlan:
    """The schedule and estimated duration of a probe, without running it.

    Parameters
    ----------
    latency : array_like, shape (n, n)
        One-way latency between processes (s): measured, or a model.
    hosts : sequence of str
        Host name of every process.
    params : ProbeParams, optional
        The probe's settings (repeats, message sizes, warmup); defaults.
    mode : {"auto", "linear", "all-pairs", "none"}
        Bandwidth schedule to plan (``"none"``: latency only; ``"auto"``, the
        probe's default: all-pairs up to 32 hosts, linear beyond).
    link_rate : float
        Pair rate in bytes/s where ``bandwidth`` is not given.
    bandwidth : array_like, shape (n, n), optional
        A model of every pair's rate; the adaptive linear schedule reacts to
        its tiers as it would to measured ones, and the all-pairs schedule's
        recheck stage pairs up the groups it shows (without it, the recheck
        is not counted: at most ``RECHECK_PASSES`` slots per two sibling
        groups).
    step_overhead : float
        Seconds per round or slot for the processes' own work.

    Returns
    -------
    ProbePlan

    Raises
    ------
    RankoptInputError
        If the matrix is not square, ``hosts`` has another length, ``mode``
        is unknown or ``link_rate`` is not positive.

    Notes
    -----
    The all-pairs schedule of a network whose latency shows no tier is
    sequential, ``n (n - 1) / 2`` slots; building it costs
    :math:`O(n^2 S / w)`, so plan it only for a few hundred processes.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.plan import plan_probe
    >>> lat = np.full((8, 8), 30e-6)
    >>> plan = plan_probe(lat, [f"h{i // 2}" for i in range(8)], mode="linear")
    >>> plan.latency_rounds, plan.bandwidth_slots, plan.levels
    (7, 12, [4])
    >>> plan_probe(lat, [f"h{i // 2}" for i in range(8)], mode="all-pairs").bandwidth_slots
    24
    """
    params = ProbeParams() if params is None else params
    lat = np.array(latency, dtype=np.float64)
    if lat.ndim != 2 or lat.shape[0] != lat.shape[1] or lat.shape[0] < 2:
        raise RankoptInputError(
            f"`latency` must be a square matrix of at least 2 processes; got shape {lat.shape}."
        )
    n = lat.shape[0]
    hosts = tuple(str(h) for h in hosts)
    if len(hosts) != n:
        raise RankoptInputError(
            f"`hosts` must name the host of each of the {n} processes; got {len(hosts)} names."
        )
    if mode not in ("auto", "linear", "all-pairs", "none"):
        raise RankoptInputError(
            f"`mode` must be 'auto', 'linear', 'all-pairs' or 'none'; got {mode!r} instead."
        )
    mode = resolve_bandwidth_mode(mode, len(set(hosts)))
    if not (isinstance(link_rate, (int, float)) and math.isfinite(link_rate) and link_rate > 0):
        raise RankoptInputError(f"`link_rate` must be a positive number; got {link_rate!r}.")
    np.fill_diagonal(lat, 0.0)
    if bandwidth is None:
        rate = np.full((n, n), float(link_rate))
    else:
        rate = np.array(bandwidth, dtype=np.float64)
        if rate.shape != (n, n):
            raise RankoptInputError(f"`bandwidth` must have shape ({n}, {n}); got {rate.shape}.")
    np.fill_diagonal(rate, 1.0)
    off = ~np.eye(n, dtype=bool)
    lat_med = float(np.median(lat[off]))
    consensus = 2 * math.ceil(math.log2(n)) * lat_med + step_overhead
    gather = (n - 1) * lat_med + n * (3 * n + 1) * 8 / float(link_rate)
    rep_lat = params.warmup + params.repeats
    rep_bw = params.warmup + params.bandwidth_repeats

    # latency phase: every round's slowest ping-pong pair
    rounds = round_robin(n)
    table = partner_table(rounds, n)
    me = np.arange(n)
    rtt = np.where(table >= 0, lat[me[None, :], np.maximum(table, 0)] * 2, 0.0)
    lat_seconds = float(np.sum(2 * rep_lat * rtt.max(axis=1)))
    lat_msgs = len(rounds) * (n // 2) * 2 * rep_lat
    control = len(rounds) * consensus + 2 * gather + consensus  # + start step

    levels = infer_link_levels(lat, hosts)
    stages: list[tuple[str, int]] = []
    slots_all: list[list[tuple[int, int]]] = []
    found = [len(set(hosts))]
    if mode == "all-pairs":
        slots_all = bandwidth_slots(lat, hosts, concurrency=params.bw_concurrency, levels=levels)
        stages = [("all-pairs", len(slots_all))]
        found = [int(lv.max()) + 1 for lv in levels]
        # the recheck of the groups the bandwidth shows (known only when it is given)
        again = recheck_pairs(rate, list(hosts)) if bandwidth is not None else []
        if again:
            stages.append(("recheck", RECHECK_PASSES * len(again)))
            slots_all = slots_all + [[p] for _ in range(RECHECK_PASSES) for p in again]
    elif mode == "linear":
        planner = LinearPlanner(lat, hosts, levels, uplink_flows=params.uplink_flows)
        while (stage := planner.next_stage()) is not None:
            stages.append((planner.stages[-1], len(stage)))
            slots_all.extend(stage)
            planner.record(
                {(a, b): (rate[a, b], rate[b, a], 0.0, 0.0) for slot in stage for a, b in slot}
            )
        found = [int(lv.max()) + 1 for lv in planner.groups or []]
    bw_seconds = sum(_slot_time(s, params.bandwidth_bytes, rep_bw, rate, lat) for s in slots_all)
    bw_msgs = sum(len(s) for s in slots_all) * 2 * rep_bw
    control += len(slots_all) * consensus + len(stages) * gather
    total_bytes = lat_msgs * params.latency_bytes + bw_msgs * params.bandwidth_bytes
    return ProbePlan(
        n=n,
        hosts=len(set(hosts)),
        mode=mode,
        latency_rounds=len(rounds),
        bandwidth_slots=len(slots_all),
        bandwidth_stages=stages,
        latency_transfers=int(lat_msgs),
        bandwidth_transfers=int(bw_msgs),
        bytes=int(total_bytes),
        latency_seconds=lat_seconds,
        bandwidth_seconds=float(bw_seconds),
        control_seconds=float(control),
        estimated_seconds=float(lat_seconds + bw_seconds + control),
        link_rate=float(link_rate),
        levels=found,
    )


def calibrate_step_overhead(measurement: Any) -> float:
    """Seconds per round or slot of the processes' own work, seen by a finished probe.

    The probe records how long each of its phases took
    (``measurement.parameters["phase_seconds"]``). Planning the same job with
    what it measured (latency, and the bandwidth of the pairs it timed) and no
    overhead gives the time the exchanges themselves explain; the rest, spread
    over every round and slot, is the overhead of those machines -- the
    processes' scheduling, the engine's progress, Python -- which the default
    :data:`STEP_OVERHEAD` (one core per process) does not know. Pass it as
    ``step_overhead`` to :func:`plan_probe` (``rankopt probe --plan --calibrate
    FILE``) to plan a larger job on the same kind of machines.

    Parameters
    ----------
    measurement : Measurement
        A probe's result that recorded its phase times.

    Returns
    -------
    float
        Seconds per step, at least 0.

    Raises
    ------
    RankoptInputError
        If the measurement has no phase times (written by an older probe) or
        no steps.
    """
    params = dict(getattr(measurement, "parameters", {}) or {})
    phases = params.get("phase_seconds")
    if not phases:
        raise RankoptInputError(
            "`measurement` has no phase times (parameters['phase_seconds']); "
            "probe again with this version to calibrate from it."
        )
    measured = float(sum(float(sec) for _, _, sec in phases))
    steps = int(sum(int(k) for _, k, _ in phases))
    if steps <= 0:
        raise RankoptInputError("`measurement` ran no rounds or slots; nothing to calibrate.")
    n = measurement.latency.shape[0]
    bw = measurement.bandwidth
    has_bw = bw is not None and len(phases) > 1
    ran = params.get("bandwidth_mode_run", params.get("bandwidth_mode", "all-pairs"))
    mode = str(ran) if has_bw else "none"
    off = ~np.eye(n, dtype=bool)
    rate = float(np.median(bw[off])) if has_bw else DEFAULT_LINK_RATE
    settings = {k: params[k] for k in _PARAM_FIELDS if k in params}
    base = plan_probe(
        measurement.latency,
        list(measurement.hosts),
        params=ProbeParams(**settings),
        mode=mode,
        link_rate=rate,
        bandwidth=bw if (has_bw and mode == "all-pairs") else None,
        step_overhead=0.0,
    )
    planned_steps = base.latency_rounds + base.bandwidth_slots
    return max(measured - base.estimated_seconds, 0.0) / max(planned_steps, steps)
