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
``warmup + repeats`` times in each direction, one direction after the other
(in the bandwidth phase a warm-up of at most ``WARMUP_BYTES`` and all
``bandwidth_repeats``, although the probe stops after two that agree, or one
that agrees with a rate already read: the estimate is the most it takes), and
each step of the sharing test one message each way.
A round or slot lasts as long as its slowest pair, plus one consensus
(an allreduce of 16 bytes: ``2 ceil(log2 n)`` median latencies) and a fixed
``step_overhead`` per step for the processes' own work (Python, the MPI
progress engine). Every phase and bandwidth stage ends with an allgather of
``n (3 n + 1)`` doubles (``ceil(log2 n)`` latencies plus the bytes at
``link_rate``); a linear latency stage gathers four doubles per pair of its
busiest process instead, and lasts until its last process has run its pairs
one after the other (no consensus between them,
:func:`~rankopt.probe.linear_latency.async_makespan`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._common import (
    LATENCY_MODES,
    ProbeParams,
    resolve_bandwidth_mode,
    resolve_latency_mode,
)
from rankopt.probe._engine import (
    RECHECK_PASSES,
    SHARING_STEPS,
    WARMUP_BYTES,
    bandwidth_levels,
    recheck_pairs,
)
from rankopt.probe.hierarchy import (
    host_block_min,
    host_labels,
    infer_host_hierarchy,
)
from rankopt.probe.linear import LinearPlanner
from rankopt.probe.schedule import (
    SampledPlanner,
    _round_count,
    bandwidth_slots,
    round_partners,
)
from rankopt.probe.sharing import loaded_pairs, sharing_pairs, sharing_slots

__all__ = [
    "ProbePlan",
    "plan_probe",
    "estimate_linear_latency",
    "LatencyEstimate",
    "control_costs",
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
        ``"linear"``, ``"all-pairs"``, ``"sampled"`` or ``"none"`` (latency only).
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
    latency_mode : str
        ``"all-pairs"`` (``latency_rounds`` lockstep rounds) or ``"linear"``
        (``latency_stages``, ``latency_rounds`` their slots in all).
    latency_stages : list of [str, int, int]
        Name, slots and pairs of every linear latency stage.
    congested_hosts : int
        Hosts the linear latency phase would report congested on the model.
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
    latency_mode: str = "all-pairs"
    latency_stages: list[list[Any]] = field(default_factory=list)
    congested_hosts: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dictionary of every attribute."""
        out = asdict(self)
        out["bandwidth_stages"] = [list(s) for s in self.bandwidth_stages]
        return out

    def _latency_line(self) -> str:
        if self.latency_mode != "linear":
            return f"{self.latency_rounds} rounds"
        parts = ", ".join(f"{name} {s}" for name, s, _ in self.latency_stages)
        pairs = sum(p for _, _, p in self.latency_stages)
        return (
            f"linear, {len(self.latency_stages)} stages of {self.latency_rounds} slots "
            f"({parts}), {pairs} pairs"
        )

    def __str__(self) -> str:
        stages = ", ".join(f"{name} {s}" for name, s in self.bandwidth_stages) or "none"
        return "\n".join(
            [
                f"probe plan: {self.n} processes on {self.hosts} host(s), "
                f"bandwidth mode {self.mode}, link rate {self.link_rate * 8 / 1e9:.3g} Gbit/s",
                f"  latency:   {self._latency_line()}, {self.latency_transfers} messages, "
                f"{self.latency_seconds:.3g} s",
                f"  bandwidth: {self.bandwidth_slots} slots ({stages}), "
                f"{self.bandwidth_transfers} transfers, {self.bandwidth_seconds:.3g} s",
                f"  control:   consensus, overheads and gathers {self.control_seconds:.3g} s",
                f"  total:     {self.bytes / 1e9:.3g} GB moved, "
                f"estimated {self.estimated_seconds:.3g} s",
                f"  groups per level: {self.levels}",
            ]
        )


def _slot_cost(
    slot: Sequence[tuple[int, int]],
    params: ProbeParams,
    rate: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]],
    lat: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]],
    *,
    lockstep: bool = False,
) -> tuple[float, float, int]:
    """Seconds, bytes and messages of one bandwidth slot.

    ``warmup`` transfers of at most :data:`~rankopt.probe._engine.WARMUP_BYTES`
    and ``bandwidth_repeats`` of ``bandwidth_bytes``, each way (the full count:
    the probe ends a direction after two that agree, so the estimate is the most
    it takes); with ``lockstep`` one of ``bandwidth_bytes`` each way (a step of
    the sharing test: the lower rank's transfers start together and are read;
    the other way runs after each, as a collective's traffic runs both ways).
    """
    if not slot:
        return 0.0, 0.0, 0
    ab = np.asarray(slot, dtype=np.int64)
    a, b = ab[:, 0], ab[:, 1]
    both = lat(a, b) + lat(b, a)
    nbytes = params.bandwidth_bytes
    if lockstep:
        seconds = nbytes / rate(a, b) + nbytes / rate(b, a) + 2 * both
        return float(seconds.max()), float(2 * nbytes * len(ab)), 2 * len(ab)
    count = params.warmup + params.bandwidth_repeats
    sent = params.warmup * min(nbytes, WARMUP_BYTES) + params.bandwidth_repeats * nbytes
    seconds = sent / rate(a, b) + sent / rate(b, a) + 2 * count * both
    return float(seconds.max()), float(2 * sent * len(ab)), 2 * count * len(ab)


def _lookup(
    matrix: NDArray[np.float64], host_of: NDArray[np.int64]
) -> Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]]:
    """Pair values ``f(a, b)`` from an (n, n) matrix, or from an (H, H) one by host."""
    if matrix.shape[0] == host_of.size:
        return lambda a, b: matrix[a, b]
    return lambda a, b: matrix[host_of[a], host_of[b]]


def _median_pair(f: Callable[..., NDArray[np.float64]], n: int) -> float:
    """The median of ``f`` over distinct process pairs (over a fixed sample when n is large)."""
    if n <= 512:
        a, b = np.nonzero(~np.eye(n, dtype=bool))
    else:
        gen = np.random.default_rng(0)  # a fixed sample: the plan is deterministic
        a, b = gen.integers(0, n, 1 << 18), gen.integers(0, n, 1 << 18)
        keep = a != b
        a, b = a[keep], b[keep]
    return float(np.median(f(a, b)))


def control_costs(
    n: int,
    lat_med: float,
    params: ProbeParams,
    link_rate: float = DEFAULT_LINK_RATE,
    step_overhead: float = STEP_OVERHEAD,
) -> tuple[float, Callable[[int], float]]:
    """Seconds of one consensus (and step overhead), and of a gather of ``w`` doubles per process.

    A consensus is an allreduce of 16 bytes: ``2 ceil(log2 n)`` median
    latencies; a gather of ``w`` doubles from every process takes
    ``ceil(log2 n)`` latencies (recursive doubling or Bruck's algorithm, what
    MPI and Gloo run for small blocks) plus ``8 n w`` bytes at ``link_rate``.
    """
    del params
    steps = math.ceil(math.log2(max(n, 2)))
    consensus = 2 * steps * lat_med + step_overhead

    def gather(width: int) -> float:
        return steps * lat_med + n * width * 8 / float(link_rate)

    return consensus, gather


@dataclass(frozen=True)
class LatencyEstimate:
    """The linear latency phase of one job, as :func:`estimate_linear_latency` plans it.

    ``seconds`` is the whole phase (pairs, consensus, gathers); ``pair_seconds``
    the pairs alone; ``stages`` lists ``[name, slots, pairs]``; ``planner`` is
    the :class:`~rankopt.probe.linear_latency.LatencyPlanner` after its last
    stage (its groups and filled host matrix).
    """

    seconds: float
    pair_seconds: float
    control_seconds: float
    stages: list[list[Any]]
    transfers: int
    planner: Any


def estimate_linear_latency(
    hosts: Sequence[str],
    latency: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]],
    *,
    params: ProbeParams | None = None,
    link_rate: float = DEFAULT_LINK_RATE,
    step_overhead: float = STEP_OVERHEAD,
    lat_med: float | None = None,
) -> LatencyEstimate:
    """Run the linear latency schedule against a latency model; its duration.

    Parameters
    ----------
    hosts : sequence of str
        Host name of every process.
    latency : callable
        ``latency(a, b)``: one-way latency of the pairs ``a -> b`` (arrays).
    params : ProbeParams, optional
    link_rate, step_overhead : float
        As in :func:`plan_probe`.
    lat_med : float, optional
        Median latency over pairs (computed from ``latency`` when omitted).

    Returns
    -------
    LatencyEstimate

    Notes
    -----
    Each stage's pairs are answered by the model (no noise); a pair lasts
    ``warmup + repeats`` round trips in each direction plus ``step_overhead``,
    and the stage until its last process is done
    (:func:`~rankopt.probe.linear_latency.async_makespan`), then one consensus
    and a gather of four doubles per pair of the busiest process.
    """
    from rankopt.probe.linear_latency import LatencyPlanner, async_makespan

    params = ProbeParams() if params is None else params
    n = len(hosts)
    if lat_med is None:
        lat_med = _median_pair(latency, n)
    consensus, gather = control_costs(n, lat_med, params, link_rate, step_overhead)
    planner = LatencyPlanner(hosts)
    count = params.warmup + params.repeats
    pair_seconds = control = 0.0
    transfers = 0
    while planner.next_stage() is not None:
        a, b = planner.stage_pairs
        ab, ba = latency(a, b), latency(b, a)
        planner.record(np.column_stack([ab, ba, np.zeros_like(ab), np.zeros_like(ab)]))
        dur = 2 * count * (ab + ba) + step_overhead
        pair_seconds += async_makespan(a, b, planner.stage_slot, dur, n)
        width = int(np.bincount(np.concatenate([a, b]), minlength=n).max(initial=0))
        control += consensus + gather(4 * width + 1)
        transfers += 2 * count * len(a)
    stages = [
        [name, s, p]
        for name, s, p in zip(
            planner.stages, planner.slots_per_stage, planner.pairs_per_stage, strict=True
        )
    ]
    return LatencyEstimate(
        seconds=pair_seconds + control,
        pair_seconds=pair_seconds,
        control_seconds=control,
        stages=stages,
        transfers=transfers,
        planner=planner,
    )


def plan_probe(
    latency: ArrayLike,
    hosts: Sequence[str],
    *,
    params: ProbeParams | None = None,
    mode: str = "auto",
    link_rate: float = DEFAULT_LINK_RATE,
    bandwidth: ArrayLike | None = None,
    step_overhead: float = STEP_OVERHEAD,
    latency_mode: str | None = None,
    groups: Sequence[ArrayLike] | None = None,
) -> ProbePlan:
    """The schedule and estimated duration of a probe, without running it.

    Parameters
    ----------
    latency : array_like, shape (n, n) or (H, H)
        One-way latency between processes (s): measured, or a model. An
        ``(H, H)`` matrix (``H`` hosts, fewer than ``n``) is a host-level
        model: entry ``[g, h]`` for every pair of processes of hosts ``g``
        and ``h`` (numbered in order of first appearance in ``hosts``), the
        diagonal inside one host -- what a job of 16,384 processes can be
        planned from without an (n, n) matrix.
    hosts : sequence of str
        Host name of every process.
    params : ProbeParams, optional
        The probe's settings (repeats, message sizes, warmup, latency mode);
        defaults.
    mode : {"auto", "linear", "all-pairs", "sampled", "none"}
        Bandwidth schedule to plan (``"none"``: latency only; ``"auto"``, the
        probe's default: sampled up to 32 hosts, linear beyond; the sampled
        schedule's groups show only in ``bandwidth``: without it the plan is
        every pair, the most it takes).
    link_rate : float
        Pair rate in bytes/s where ``bandwidth`` is not given.
    bandwidth : array_like, shape (n, n), optional
        A model of every pair's rate; the adaptive linear schedule reacts to
        its tiers as it would to measured ones, and the all-pairs schedule's
        recheck stage pairs up the groups it shows (without it, the recheck
        is not counted: at most ``RECHECK_PASSES`` slots per two sibling
        groups), and so do the sharing test's ``2 SHARING_STEPS + 1`` slots
        (``SHARING_STEPS + 1`` more across a loaded way).
    step_overhead : float
        Seconds per round, slot or latency pair for the processes' own work.
    latency_mode : {"auto", "all-pairs", "linear"}, optional
        Latency schedule to plan; default ``params.latency_mode`` (``"auto"``:
        all-pairs up to 64 processes, linear beyond).
    groups : sequence of array_like of int, optional
        The groups known beforehand (a provider's topology,
        :meth:`rankopt.probe.topology_sources.TopologyLabels.groups`: process
        labels per level, hosts first), as the probe takes them with
        ``topology=``: the linear bandwidth schedule (``mode="auto"``)
        discovers nothing and tests these groups' uplinks.

    Returns
    -------
    ProbePlan

    Raises
    ------
    RankoptInputError
        If the matrix is not square or of neither size, ``hosts`` has
        another length, a mode is unknown or ``link_rate`` is not positive.

    Notes
    -----
    The planner's own cost: the linear latency schedule and the linear
    bandwidth schedule work from host-level matrices, :math:`O(n + P + H^2)`
    memory for ``P`` planned pairs, never a copy of an (n, n) matrix. The
    all-pairs latency schedule is priced round by round in :math:`O(n)`
    memory and :math:`O(n^2)` time. The all-pairs bandwidth schedule of a
    network whose latency shows no tier is sequential, ``n (n - 1) / 2``
    slots; building it costs :math:`O(n^2 S / w)`, so plan it only for a
    few hundred processes.

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
    lat = np.asarray(latency, dtype=np.float64)
    hosts = tuple(str(h) for h in hosts)
    n = len(hosts)
    host_of = host_labels(hosts)
    n_hosts = int(host_of.max()) + 1 if n else 0
    if lat.ndim != 2 or lat.shape[0] != lat.shape[1] or lat.shape[0] < 2:
        raise RankoptInputError(
            f"`latency` must be a square matrix of at least 2 processes; got shape {lat.shape}."
        )
    if lat.shape[0] not in (n, n_hosts) or n < 2:
        raise RankoptInputError(
            f"`hosts` must name the host of each of the {lat.shape[0]} processes (or of "
            f"processes on {lat.shape[0]} hosts); got {n} names."
        )
    if mode not in ("auto", "linear", "all-pairs", "sampled", "none"):
        raise RankoptInputError(
            "`mode` must be 'auto', 'linear', 'all-pairs', 'sampled' or 'none'; "
            f"got {mode!r} instead."
        )
    lat_mode = params.latency_mode if latency_mode is None else latency_mode
    if lat_mode not in LATENCY_MODES:
        raise RankoptInputError(
            f"`latency_mode` must be one of {', '.join(map(repr, LATENCY_MODES))}; "
            f"got {lat_mode!r} instead."
        )
    lat_mode = resolve_latency_mode(lat_mode, n)
    given = None
    if groups is not None:
        given = [np.asarray(lv, dtype=np.int64) for lv in groups]
        if not given or any(lv.shape != (n,) for lv in given):
            raise RankoptInputError(
                f"`groups` must be labels of the {n} processes per level; got shapes "
                f"{[lv.shape for lv in given]}."
            )
    mode = resolve_bandwidth_mode(mode, n_hosts, groups_given=given is not None)
    if not (isinstance(link_rate, (int, float)) and math.isfinite(link_rate) and link_rate > 0):
        raise RankoptInputError(f"`link_rate` must be a positive number; got {link_rate!r}.")
    process_level = lat.shape[0] == n
    base_lat = _lookup(lat, host_of)

    def lat_of(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.where(a == b, 0.0, base_lat(a, b)) if process_level else base_lat(a, b)

    if bandwidth is None:
        rate_matrix = None

        def rate_of(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
            return np.full(np.shape(a), float(link_rate))

    else:
        rate_matrix = np.asarray(bandwidth, dtype=np.float64)
        if rate_matrix.shape != (n, n):
            raise RankoptInputError(
                f"`bandwidth` must have shape ({n}, {n}); got {rate_matrix.shape}."
            )
        rm = rate_matrix

        def rate_of(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
            return np.where(a == b, 1.0, rm[a, b])

    lat_med = _median_pair(lat_of, n)
    consensus, gather = control_costs(n, lat_med, params, link_rate, step_overhead)
    rep_lat = params.warmup + params.repeats
    latency_stages: list[list[Any]] = []
    congested = 0
    if lat_mode == "linear":
        est = estimate_linear_latency(
            hosts,
            lat_of,
            params=params,
            link_rate=link_rate,
            step_overhead=step_overhead,
            lat_med=lat_med,
        )
        lat_seconds = est.pair_seconds
        control = est.control_seconds + consensus  # + start step
        lat_msgs = est.transfers
        latency_rounds = sum(s for _, s, _ in est.stages)
        latency_stages = est.stages
        planner = est.planner
        levels = planner.levels()
        plan_lat: NDArray[np.float64] = planner.host_matrix(factors=False)[0]
        congested = int(np.sum(planner.factor > 1.0))
    else:
        # every round's slowest ping-pong pair, one round at a time
        latency_rounds = _round_count(n)
        lat_seconds = 0.0
        me = np.arange(n)
        for r in range(latency_rounds):
            partner = round_partners(n, r)
            on = partner >= 0
            rtt = 2 * lat_of(me[on], partner[on])
            lat_seconds += 2 * rep_lat * float(rtt.max(initial=0.0))
        lat_msgs = latency_rounds * (n // 2) * 2 * rep_lat
        control = latency_rounds * consensus + 2 * gather(3 * n + 1) + consensus
        plan_lat = lat if not process_level else host_block_min(lat, host_of)
        levels = infer_host_hierarchy(host_of, plan_lat if process_level else _min_sym(lat))

    stages: list[tuple[str, int]] = []
    slots_all: list[list[tuple[int, int]]] = []
    bw_levels: list[NDArray[np.int64]] | None = None
    found = [n_hosts]
    if mode in ("all-pairs", "sampled"):
        seen = rate_matrix  # the rates whose groups the recheck pairs up
        if mode == "sampled" and given is None:
            # the stars' groups from the given bandwidth; without it every rate is the
            # link rate, no group shows, and every pair is measured (the most it takes)
            sampler = SampledPlanner(hosts, levels=levels, concurrency=params.bw_concurrency)
            both = np.arange(n)
            rates = rate_of(both[:, None], both[None, :])
            while (stage := sampler.next_stage()) is not None:
                slots_all.extend(stage)
                ran = np.zeros((n, n), dtype=np.int64)
                for a, b in (p for slot in stage for p in slot):
                    ran[a, b] = ran[b, a] = 1
                sampler.record(np.where(ran > 0, rates, 0.0), np.zeros((n, n)), ran)
            stages = [(name, int(k)) for name, k in sampler.stages]
            filled, _, _, sampled = sampler.result()
            found = [int(lv.max()) + 1 for lv in levels]
            if sampled["sampled_groups"] is not None:
                found = [found[0], len(set(sampled["sampled_groups"]))]
            if rate_matrix is not None:
                seen = filled
        else:
            slots_all = bandwidth_slots(
                np.zeros((0, 0)),
                hosts,
                concurrency=params.bw_concurrency,
                levels=levels if given is None else given,
            )
            stages = [("all-pairs", len(slots_all))]
            found = [int(lv.max()) + 1 for lv in levels]
        # the recheck of the groups the bandwidth shows (known only when it is given)
        if seen is not None:
            bw_levels = bandwidth_levels(seen, list(hosts))
            again = recheck_pairs(seen, list(hosts), bw_levels) if bw_levels else []
            if again:
                stages.append(("recheck", RECHECK_PASSES * len(again)))
                slots_all = slots_all + [[p] for _ in range(RECHECK_PASSES) for p in again]
    elif mode == "linear":
        bw_planner = LinearPlanner(
            plan_lat,
            hosts,
            levels,
            uplink_flows=params.uplink_flows,
            domains=levels if lat_mode == "linear" else None,
            given=given,
        )
        while (stage := bw_planner.next_stage()) is not None:
            stages.append((bw_planner.stages[-1], len(stage)))
            slots_all.extend(stage)
            pairs = np.array([p for slot in stage for p in slot], dtype=np.int64).reshape(-1, 2)
            r_ab = rate_of(pairs[:, 0], pairs[:, 1])
            r_ba = rate_of(pairs[:, 1], pairs[:, 0])
            bw_planner.record(
                {
                    (int(a), int(b)): (float(x), float(y), 0.0, 0.0)
                    for (a, b), x, y in zip(pairs.tolist(), r_ab, r_ba, strict=True)
                }
            )
        found = [int(lv.max()) + 1 for lv in bw_planner.groups or []]
    elif lat_mode == "linear":
        found = [int(lv.max()) + 1 for lv in levels]
    # the sharing test on the groups the bandwidth shows (all-pairs: known only when given)
    share_levels: Any = None
    if mode in ("all-pairs", "sampled") and bw_levels is not None:
        share_levels = bw_levels
    elif mode == "linear":
        share_levels = bw_planner.groups
    shared = sharing_pairs(share_levels, rates=rate_matrix) if share_levels else []
    paired_slots = len(slots_all)  # then the sharing test's lockstep steps: one message each
    if shared:
        stages.append(("sharing", 2 * SHARING_STEPS + 1))
        slots_all = slots_all + sharing_slots(shared, SHARING_STEPS)
        # and across the most loaded way out of a group, when one is much slower
        loaded = loaded_pairs(share_levels, rate_matrix)[0] if rate_matrix is not None else []
        if loaded:
            stages.append(("sharing", SHARING_STEPS + 1))
            slots_all = slots_all + [list(loaded) for _ in range(SHARING_STEPS + 1)]
    costs = [
        _slot_cost(s, params, rate_of, lat_of, lockstep=k >= paired_slots)
        for k, s in enumerate(slots_all)
    ]
    bw_seconds = sum(c[0] for c in costs)
    bw_msgs = sum(c[2] for c in costs)
    control += len(slots_all) * consensus + len(stages) * gather(3 * n + 1)
    total_bytes = lat_msgs * params.latency_bytes + sum(c[1] for c in costs)
    return ProbePlan(
        n=n,
        hosts=n_hosts,
        mode=mode,
        latency_rounds=latency_rounds,
        bandwidth_slots=len(slots_all),
        bandwidth_stages=stages,
        latency_transfers=int(lat_msgs),
        bandwidth_transfers=int(bw_msgs),
        bytes=int(total_bytes),
        latency_seconds=float(lat_seconds),
        bandwidth_seconds=float(bw_seconds),
        control_seconds=float(control),
        estimated_seconds=float(lat_seconds + bw_seconds + control),
        link_rate=float(link_rate),
        levels=found,
        latency_mode=lat_mode,
        latency_stages=latency_stages,
        congested_hosts=congested,
    )


def _min_sym(m: NDArray[np.float64]) -> NDArray[np.float64]:
    out = np.minimum(m, m.T)
    np.fill_diagonal(out, 0.0)
    return out


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
        bandwidth=bw if (has_bw and mode in ("all-pairs", "sampled")) else None,
        step_overhead=0.0,
        latency_mode=str(params.get("latency_mode_run", "all-pairs")),
    )
    planned_steps = base.latency_rounds + base.bandwidth_slots
    return max(measured - base.estimated_seconds, 0.0) / max(planned_steps, steps)
