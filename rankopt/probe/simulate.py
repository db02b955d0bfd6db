"""The probe's own planning and inference code, run against a modelled network.

No machine at hand has 1,024 or 4,096 processes on a cloud's network, so the
scale of the probe is checked here: the same planners the engine runs
(:class:`~rankopt.probe.linear_latency.LatencyPlanner`,
:class:`~rankopt.probe.linear.LinearPlanner`) are fed measurements that a
model of the network answers -- per-sample noise with a heavy tail, congested
VMs, shared uplinks -- and the probe's duration is simulated (not slept)
with the same rules as the real engine: latency stages run pair by pair in
each process's own order, bandwidth slots side by side, each step followed by
a consensus and each stage by a gather.

Contents
--------
ModelNetwork
    Hosts in groups (zones, racks, ...), per-level latency and bandwidth
    between groups, congested hosts, noise; answers latency samples and
    slot rates for any pair without an (n, n) matrix.
random_network
    A random layout: unequal zones and racks, unequal processes per host,
    noise, congested VMs.
simulate_probe
    Run the probe's schedule against a model: the groups it found, the
    filled latency, the simulated duration, and the plan's estimate.
SimResult
    What :func:`simulate_probe` returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._rng import normalize_rng
from rankopt.probe._common import ProbeParams
from rankopt.probe.hierarchy import host_labels

__all__ = ["ModelNetwork", "random_network", "simulate_probe", "SimResult"]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64 finaliser: a well-spread 64-bit hash of every element."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def _pair_normal(seed: int, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
    """A standard normal value per unordered pair ``{a, b}``, the same at every call."""
    lo = np.minimum(a, b).astype(np.uint64)
    hi = np.maximum(a, b).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = (lo * np.uint64(0x100000001B3)) ^ hi ^ (np.uint64(seed & 0xFFFFFFFF) << np.uint64(40))
    u1 = (_mix(key) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    u2 = (_mix(key ^ np.uint64(0xA5A5A5A5)) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return np.sqrt(-2.0 * np.log(np.maximum(u1, 1e-300))) * np.cos(2.0 * np.pi * u2)


@dataclass(frozen=True, eq=False)
class ModelNetwork:
    """A modelled network of ``n`` processes on hosts in nested groups.

    Attributes
    ----------
    hosts : tuple of str
        Host name of every process.
    host_latency : ndarray, shape (H, H)
        One-way latency between two hosts' processes before noise and
        congestion (s); the diagonal is the latency inside one host.
    host_bandwidth : ndarray, shape (H, H)
        Rate of one transfer alone between two hosts (bytes/s); the diagonal
        inside one host.
    factor : ndarray, shape (H,)
        Congestion of every host: its links to other hosts are this many
        times slower (1: not congested).
    groups : list of ndarray
        True group label of every host per level above the hosts, finest
        first.
    uplink : list of ndarray
        Capacity of every group's uplink per level (bytes/s), shared by the
        transfers that leave or enter the group at once.
    pair_sigma : float
        Lognormal spread of every pair's own latency around its level's.
    sample_sigma : float
        Lognormal spread of every sample around its pair's latency.
    tail : float
        Shape of the Pareto (Lomax) heavy tail of the samples; 0: none.
    tail_scale, tail_max : float
        A sample is multiplied by ``1 + tail_scale * min(X, tail_max)``, ``X``
        Lomax(``tail``): a spike of up to 50 times the pair's latency (a real
        network's tail is bounded, by retransmission timers if nothing else).
    seed : int
        Seed of the pairs' own deviations.
    """

    hosts: tuple[str, ...]
    host_latency: NDArray[np.float64]
    host_bandwidth: NDArray[np.float64]
    factor: NDArray[np.float64]
    groups: list[NDArray[np.int64]]
    uplink: list[NDArray[np.float64]] = field(default_factory=list)
    pair_sigma: float = 0.0
    sample_sigma: float = 0.0
    tail: float = 0.0
    tail_scale: float = 0.2
    tail_max: float = 250.0
    seed: int = 0

    @property
    def n(self) -> int:
        return len(self.hosts)

    @cached_property
    def host_of(self) -> NDArray[np.int64]:
        """Host label of every process (hosts in order of first appearance)."""
        return host_labels(self.hosts)

    def latency(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """The latency of pairs ``a -> b`` without sample noise (s), vectorised."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        h = self.host_of
        ha, hb = h[a], h[b]
        base = self.host_latency[ha, hb]
        cross = ha != hb
        f = np.where(cross, self.factor[ha] * self.factor[hb], 1.0)
        own = np.exp(self.pair_sigma * _pair_normal(self.seed, a, b))
        return base * f * own

    def bandwidth(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """The rate of one transfer ``a -> b`` alone (bytes/s), vectorised."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        h = self.host_of
        ha, hb = h[a], h[b]
        f = np.where(ha != hb, self.factor[ha] * self.factor[hb], 1.0)
        return self.host_bandwidth[ha, hb] / f

    def latency_matrix(self) -> NDArray[np.float64]:
        """The (n, n) latency without sample noise (for jobs small enough to hold it)."""
        n = self.n
        a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        out = self.latency(a.ravel(), b.ravel()).reshape(n, n)
        np.fill_diagonal(out, 0.0)
        return out

    def samples(
        self, a: NDArray[np.int64], b: NDArray[np.int64], count: int, gen: np.random.Generator
    ) -> NDArray[np.float64]:
        """``count`` one-way latency samples per pair, shape (len(a), count)."""
        base = self.latency(a, b)[:, None]
        noise = np.exp(self.sample_sigma * gen.standard_normal((base.shape[0], count)))
        if self.tail > 0:
            spike = np.minimum(gen.pareto(self.tail, noise.shape), self.tail_max)
            noise = noise * (1.0 + self.tail_scale * spike)
        return base * noise

    def describe(self) -> str:
        sizes = [int(g.max()) + 1 for g in self.groups]
        congested = int(np.sum(self.factor > 1.0))
        return (
            f"{self.n} processes on {len(self.factor)} hosts, groups per level {sizes}, "
            f"{congested} congested hosts"
        )


def random_network(
    n: int,
    n_hosts: int,
    *,
    zones: int = 2,
    sigma: float = 0.1,
    congested: float = 0.08,
    racks: bool = True,
    tail: float = 1.5,
    rng: None | int | np.random.Generator = None,
) -> ModelNetwork:
    """A random cloud layout: unequal zones and racks, congested VMs, heavy-tailed noise.

    Parameters
    ----------
    n, n_hosts : int
        Processes and hosts (processes spread over the hosts, unequally when
        ``n`` is not a multiple).
    zones : int
        Top-level groups (availability zones), of unequal sizes; one-way
        latency between two zones is drawn in 0.6-1.5 ms per zone pair.
    sigma : float
        Lognormal noise of every sample; every pair's own deviation is half
        of it.
    congested : float
        Fraction of hosts whose links are 1.5-3 times slower.
    racks : bool
        Whether zones hold racks (unequal, 1 to 48 hosts) with a lower
        latency inside (20-30 us, each rack within 15 %) than across
        (75-120 us, each zone within 15 %).
    tail : float
        Pareto shape of the samples' heavy tail (0: none).
    rng : None, int or Generator

    Returns
    -------
    ModelNetwork

    Examples
    --------
    >>> from rankopt.probe.simulate import random_network
    >>> net = random_network(64, 16, rng=1)
    >>> net.n, len(net.factor), len(net.groups) >= 1
    (64, 16, True)
    """
    gen, seed = normalize_rng(rng)
    if n_hosts < 1 or n < n_hosts:
        raise ValueError(f"need 1 <= n_hosts <= n; got n={n}, n_hosts={n_hosts}")
    zones = max(1, min(zones, n_hosts))
    share = gen.dirichlet(np.full(zones, 3.0))
    zsize = np.maximum(1, np.round(share * n_hosts).astype(int))
    zsize[-1] = n_hosts - zsize[:-1].sum()
    while zsize[-1] < 1:
        zsize[int(np.argmax(zsize))] -= 1
        zsize[-1] += 1
    zone = np.repeat(np.arange(zones), zsize)
    rack = np.zeros(n_hosts, dtype=np.int64)
    next_rack = 0
    for z in range(zones):
        members = np.flatnonzero(zone == z)
        i = 0
        while i < members.size:
            size = (
                int(np.clip(round(gen.lognormal(np.log(12), 0.8)), 1, 48))
                if racks
                else members.size
            )
            rack[members[i : i + size]] = next_rack
            next_rack += 1
            i += size
    # latency by level: in-host, same rack, same zone, across zones (per zone pair)
    # each level within 15% of its network-wide value, levels 2.5-6 times apart
    in_host = gen.uniform(3e-6, 8e-6)
    in_rack = gen.uniform(20e-6, 30e-6) * gen.uniform(0.87, 1.15, size=next_rack)
    in_zone = gen.uniform(75e-6, 120e-6) * gen.uniform(0.87, 1.15, size=zones)
    across = gen.uniform(0.6e-3, 1.5e-3, size=(zones, zones))
    across = np.triu(across, 1) + np.triu(across, 1).T
    rack_pair = 1.0 + 0.1 * gen.uniform(-1, 1, size=(next_rack, next_rack))
    rack_pair = np.triu(rack_pair, 1) + np.triu(rack_pair, 1).T + np.eye(next_rack)
    same_rack = rack[:, None] == rack[None, :]
    same_zone = zone[:, None] == zone[None, :]
    lat = (
        np.where(
            same_rack,
            in_rack[rack][:, None],
            np.where(same_zone, in_zone[zone][:, None], across[zone][:, zone]),
        )
        * rack_pair[np.ix_(rack, rack)]
    )
    np.fill_diagonal(lat, in_host)
    # bandwidth: 100 Gbit/s in a host, 25 in a rack, 10 in a zone, 5 across
    bw = np.where(same_rack, 25e9 / 8, np.where(same_zone, 10e9 / 8, 5e9 / 8))
    np.fill_diagonal(bw, 100e9 / 8)
    factor = np.where(gen.random(n_hosts) < congested, gen.uniform(1.5, 3.0, n_hosts), 1.0)
    per = np.full(n_hosts, n // n_hosts)
    per[gen.choice(n_hosts, size=n - per.sum(), replace=False)] += 1
    # launch order shuffled, as a scheduler hands out VMs
    perm = gen.permutation(n_hosts)
    host_names = [f"z{zone[h]}-r{rack[h]}-h{h}" for h in range(n_hosts)]
    procs = np.repeat(perm, per[perm])
    procs = procs[gen.permutation(n)]
    # hosts numbered in order of first appearance (the probe's numbering)
    _, first = np.unique(procs, return_index=True)
    order = np.argsort(first)
    hosts_in_order = np.unique(procs)[order]
    renum = np.empty(n_hosts, dtype=np.int64)
    renum[hosts_in_order] = np.arange(n_hosts)
    back = hosts_in_order
    groups = (
        [_first_seen(rack[back]), _first_seen(zone[back])] if racks else [_first_seen(zone[back])]
    )
    groups = [g for g in groups if 1 < g.max() + 1 < n_hosts]
    uplink = [
        np.full(int(g.max()) + 1, cap) for g, cap in zip(groups, (40e9 / 8, 20e9 / 8), strict=False)
    ]
    return ModelNetwork(
        hosts=tuple(host_names[p] for p in procs),
        host_latency=lat[np.ix_(back, back)],
        host_bandwidth=bw[np.ix_(back, back)],
        factor=factor[back],
        groups=groups,
        uplink=uplink,
        pair_sigma=sigma / 2.0,
        sample_sigma=sigma,
        tail=tail,
        seed=seed & 0xFFFFFFFF,
    )


def _first_seen(lab: NDArray[np.int64]) -> NDArray[np.int64]:
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inv.reshape(-1)].astype(np.int64)


@dataclass(frozen=True)
class SimResult:
    """The outcome of one simulated probe.

    Attributes
    ----------
    levels : list of ndarray
        Host-level group labels per level above the hosts that the probe found.
    found : bool
        Whether they are the model's groups (same partitions, same number of
        levels).
    seconds : float
        Simulated duration of the latency phase, and of the whole probe in
        ``phase_seconds``.
    estimated : float
        The plan's estimate of the latency phase for the same job (from the
        model's latencies, without noise).
    phase_seconds : dict of str to float
    stages : list of [str, int, int]
        Latency stages: name, slots, pairs.
    congested_found, congested_true : set of int
        Hosts reported congested, and those that are.
    fill_error : float
        Median over random process pairs of ``|log(filled / measured)|``,
        ``measured`` being what an all-pairs probe would have measured for
        the pair (its median over ``repeats`` noisy round trips).
    noise_floor : float
        The same between two such all-pairs measurements: the fill is as
        good as measuring every pair when ``fill_error`` is close to it.
    pairs_cut : int
        Pairs whose ping-pongs stopped early (:data:`~rankopt.probe._engine.PAIR_BUDGET`).
    info : dict
    """

    levels: list[NDArray[np.int64]]
    found: bool
    seconds: float
    estimated: float
    phase_seconds: dict[str, float]
    stages: list[list[Any]]
    congested_found: set[int]
    congested_true: set[int]
    fill_error: float
    noise_floor: float = math.nan
    pairs_cut: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def _same_levels(found: Sequence[NDArray[np.int64]], true: Sequence[NDArray[np.int64]]) -> bool:
    if len(found) != len(true):
        return False
    for f, t in zip(found, true, strict=True):
        pairs = set(zip(f.tolist(), t.tolist(), strict=True))
        if not (len(pairs) == len(set(f.tolist())) == len(set(t.tolist()))):
            return False
    return True


def simulate_probe(
    net: ModelNetwork,
    params: ProbeParams | None = None,
    *,
    rng: None | int | np.random.Generator = None,
    fill_pairs: int = 20000,
) -> SimResult:
    """Run the linear latency phase of the probe against ``net``, in simulated time.

    Every stage of :class:`~rankopt.probe.linear_latency.LatencyPlanner` is
    answered by the model: each pair's ``warmup + repeats`` ping-pongs in
    each direction are sampled (noise, heavy tail, congestion), their median
    over two is the measured latency, and the pair lasts the sum of its round
    trips, cut short as the engine cuts it
    (:func:`rankopt.probe._engine.pair_budget_cut`). The stage lasts until the
    last process has run its pairs in slot order
    (:func:`~rankopt.probe.linear_latency.async_makespan`), plus the consensus
    and gather costs of :func:`rankopt.probe.plan.plan_probe`.

    Parameters
    ----------
    net : ModelNetwork
    params : ProbeParams, optional
    rng : None, int or Generator
        Seed of the samples.
    fill_pairs : int
        Random process pairs on which the filled latency is compared with the
        model (``fill_error``).

    Returns
    -------
    SimResult
    """
    from rankopt.probe._engine import pair_budget_cut
    from rankopt.probe.linear_latency import LatencyPlanner, async_makespan
    from rankopt.probe.plan import (
        STEP_OVERHEAD,
        _median_pair,
        control_costs,
        estimate_linear_latency,
    )

    params = ProbeParams() if params is None else params
    gen, _ = normalize_rng(rng)
    n = net.n
    planner = LatencyPlanner(net.hosts)
    count = params.warmup + params.repeats
    consensus, gather_cost = control_costs(n, _median_pair(net.latency, n), params)
    seconds = 0.0
    cut = 0
    while planner.next_stage() is not None:
        a, b = planner.stage_pairs
        values = np.empty((len(a), 4))
        dur = np.zeros(len(a))
        for col, (x, y) in enumerate(((a, b), (b, a))):
            one = net.samples(x, y, count, gen)
            back = net.samples(y, x, count, gen)
            rtt = one + back
            used = pair_budget_cut(rtt[:, params.warmup :], params.repeats)
            cut += int(np.sum(used < params.repeats))
            timed = rtt[:, params.warmup :]
            mask = np.arange(timed.shape[1])[None, :] < used[:, None]
            masked = np.where(mask, timed, np.nan)
            half = masked / 2.0
            med = np.nanmedian(half, axis=1)
            values[:, col] = med
            values[:, col + 2] = np.nanmedian(np.abs(half - med[:, None]), axis=1)
            dur += rtt[:, : params.warmup].sum(axis=1) + np.nansum(masked, axis=1)
        dur += STEP_OVERHEAD
        planner.record(values)
        width = 4 * _stage_width(a, b, n) + 1  # four doubles per pair, and the finish time
        seconds += async_makespan(a, b, planner.stage_slot, dur, n) + consensus + gather_cost(width)
    levels = [lv for lv in _host_levels(planner)]
    found = _same_levels(levels, net.groups)
    estimate = estimate_linear_latency(net.hosts, net.latency, params=params)
    congested_found = {int(h) for h in np.flatnonzero(planner.factor > 1.0)}
    congested_true = {int(h) for h in np.flatnonzero(net.factor > 1.0)}
    if fill_pairs > 0:
        pa = gen.integers(0, n, fill_pairs)
        pb = gen.integers(0, n, fill_pairs)
        keep = pa != pb
        pa, pb = pa[keep], pb[keep]

        def measured() -> NDArray[np.float64]:
            rtt = net.samples(pa, pb, params.repeats, gen) + net.samples(
                pb, pa, params.repeats, gen
            )
            return np.median(rtt / 2.0, axis=1)

        # what an all-pairs probe would have measured, twice: the noise floor
        first, second = measured(), measured()
        fill_error = float(np.median(np.abs(np.log(planner.values(pa, pb) / first))))
        noise_floor = float(np.median(np.abs(np.log(second / first))))
    else:
        fill_error = noise_floor = math.nan
    return SimResult(
        levels=levels,
        found=found,
        seconds=seconds,
        estimated=estimate.seconds,
        phase_seconds={"latency": seconds},
        stages=[
            [s, k, p]
            for s, k, p in zip(
                planner.stages, planner.slots_per_stage, planner.pairs_per_stage, strict=True
            )
        ],
        congested_found=congested_found,
        congested_true=congested_true,
        fill_error=fill_error,
        noise_floor=noise_floor,
        pairs_cut=cut,
        info={"congested_hosts": planner.congested()},
    )


def _host_levels(planner: Any) -> list[NDArray[np.int64]]:
    """The planner's levels above the hosts, as host labels."""
    first = np.unique(planner.host_of, return_index=True)[1]
    return [lv[first] for lv in planner.levels()[1:]]


def _stage_width(a: NDArray[np.int64], b: NDArray[np.int64], n: int) -> int:
    """Most pairs one process is in during a stage (the gather's row length)."""
    return int(np.bincount(np.concatenate([a, b]), minlength=n).max(initial=0))
