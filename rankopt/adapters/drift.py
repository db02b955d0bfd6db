"""Does a stored network still hold? ``rankopt check``'s comparison, engine-free.

Contents
--------
choose_pairs
    The few bandwidth pairs worth re-measuring: one per block of alike pairs
    (:func:`rankopt.network.core.alike_blocks`: every ordered pair of racks, the
    pairs inside every rack, ...), at most ``max_pairs``.
compare
    The stored network against a cheap re-probe (all-pairs latency and the
    chosen bandwidth pairs): which entries moved beyond their noise, the
    network as it is now (every block scaled by what its sampled pair
    shows, uplinks re-inferred), and whether re-ordering would pay.
CheckResult
    What :func:`compare` found, with :meth:`~CheckResult.text`.
HOLDS, CHANGED
    The verdicts on the network.

An entry *moved* when its ratio to the stored value is beyond both
``tolerance`` (default 25%) and three standard errors of the two medians
(:func:`rankopt.network.core._log_sigma` without the block term). The network
*holds* when no sampled bandwidth moved and the latency now changes the stored
order's modelled time by less than ``tolerance`` (a busy machine's latency
moves by tens of per cent and does not matter to bandwidth-bound calls; the
note still reports it); else it *changed*. Re-ordering *pays* when the order
solved on the network as it is now beats the stored order by the lower end
of its 90% interval (:func:`rankopt.models.robust.speedup_interval`, launch = the
stored order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError
from rankopt.network.core import Network, alike_blocks

__all__ = ["CHANGED", "HOLDS", "CheckResult", "choose_pairs", "compare", "pair_uses"]

HOLDS = "holds"
CHANGED = "changed"
TOLERANCE = 0.25


def choose_pairs(
    network: Network,
    *,
    max_pairs: int = 24,
    rng: int = 0,
    cover: bool = False,
    uses: Callable[[int, int], set[tuple[Any, ...]]] | None = None,
) -> list[tuple[int, int]]:
    """One pair per block of alike pairs, crossing blocks first, at most ``max_pairs``.

    Each block's pair is picked so that the pairs can be measured side by side
    in few slots (:func:`pair_uses`: pairs that share no host and no uplink in
    the same direction): the first pair of the block that fits the earliest
    slot opened so far, on hosts the pairs already chosen use least. The check
    then takes a few slots rather than one per pair, and its pairs spread over
    many hosts instead of coming back to the first ones. Deterministic for a
    given ``rng`` (which also picks the blocks when there are more than
    ``max_pairs``).

    With ``cover``, of the blocks that cross uplinks only as many as it takes
    to cross every uplink a block stands for once in each direction (the
    uplinks of the two groups its pairs leave at the highest level where they
    differ; blocks that cross only uplinks no block chosen so far crosses
    first: on ``G`` racks a cycle of ``G`` rack-to-rack pairs instead of all
    ``G (G - 1)``), and every block within a group. An uplink that changed shows in the one
    pair that crosses it; a change between two particular groups that leaves
    both their uplinks as they were does not. The launch's drift check
    (:func:`rankopt.adapters.cache.probe_with_cache`) samples this way, since
    the pairs that cross the top level are measured one at a time. ``uses``:
    ``pair_uses(network)`` when already built.

    Examples
    --------
    >>> import numpy as np
    >>> rack = np.array([0, 0, 1, 1])
    >>> bw = np.where(rack[:, None] == rack[None, :], 100e6, 20e6)
    >>> net = Network.from_matrices(np.full((4, 4), 1e-5), bw)
    >>> choose_pairs(net)
    [(0, 2), (3, 1), (0, 1), (2, 3)]
    >>> three = np.repeat([0, 1, 2], 2)
    >>> bw3 = np.where(three[:, None] == three[None, :], 100e6, 20e6)
    >>> choose_pairs(Network.from_matrices(np.full((6, 6), 1e-5), bw3), cover=True)
    [(0, 2), (3, 4), (5, 1), (0, 1), (2, 3), (4, 5)]
    """
    n = network.n
    blocks = alike_blocks(network.groups, n, network.hosts)
    from rankopt.network.core import meet_levels

    meet = meet_levels(network.groups, n)
    gen = np.random.default_rng(rng)
    off = ~np.eye(n, dtype=bool)
    flat = np.flatnonzero(off.ravel())  # pair k = (flat[k] // n, flat[k] % n), row-major
    ids = blocks.ravel()[flat]
    if ids.size and int(ids.max()) < np.iinfo(np.int16).max:  # a radix sort, not a merge sort
        ids = ids.astype(np.int16)
    by_block = np.argsort(ids, kind="stable")  # each block's pairs in row-major order
    sorted_ids = ids[by_block]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    uniq = sorted_ids[starts]
    stops = np.append(starts[1:], len(by_block))
    firsts = flat[by_block[starts]]
    rank = sorted(range(len(uniq)), key=lambda b: (-int(meet.ravel()[firsts[b]]), int(firsts[b])))
    uses = pair_uses(network) if uses is None else uses
    if cover:
        rank = _uplink_cover(network, rank, [divmod(int(firsts[b]), n) for b in range(len(uniq))])
    if len(rank) > max_pairs:
        rank = [rank[k] for k in np.sort(gen.choice(len(rank), size=max_pairs, replace=False))]
    host_of = _host_labels(network)
    load = np.zeros(int(host_of.max()) + 1, dtype=np.int64)
    taken: list[set[tuple[Any, ...]]] = []
    pairs: list[tuple[int, int]] = []
    for b in rank:
        members = flat[by_block[starts[b] : stops[b]]]
        if len(members) > _CANDIDATES:  # an even spread of the block's pairs
            members = members[np.linspace(0, len(members) - 1, _CANDIDATES).astype(np.int64)]
        best: tuple[int, int, int] | None = None  # (slot, host load, position)
        for pos, k in enumerate(members.tolist()):
            i, j = divmod(int(k), n)
            need = uses(i, j)
            slot = next((s for s, busy in enumerate(taken) if not need & busy), len(taken))
            key = (slot, int(load[host_of[i]] + load[host_of[j]]), pos)
            if best is None or key < best:
                best = key
        assert best is not None
        slot, _, pos = best
        i, j = divmod(int(members[pos]), n)
        if slot == len(taken):
            taken.append(set())
        taken[slot] |= uses(i, j)
        load[host_of[i]] += 1
        load[host_of[j]] += 1
        pairs.append((i, j))
    return pairs


#: Pairs of one block considered by :func:`choose_pairs` (evenly spread over it).
_CANDIDATES = 64


def _uplink_cover(network: Network, rank: list[int], first: list[tuple[int, int]]) -> list[int]:
    """The blocks of ``rank`` (in its order) that :func:`choose_pairs` keeps with ``cover``.

    ``first[b]``: a pair of block ``b``. The pairs of a block leave the same two
    groups at the highest level where they differ, and it is those groups'
    uplinks that the block stands for (:func:`rankopt.network.core.alike_blocks`);
    below it they may cross different ones.
    """
    from rankopt.network.core import _same_partition

    levels = [np.asarray(g, dtype=np.int64) for g in (network.groups or [])]
    skip = (
        1
        if levels and network.hosts is not None and _same_partition(levels[0], network.hosts)
        else 0
    )

    def top(b: int) -> int:
        """The highest level whose groups block ``b``'s pairs leave (-1: none above the hosts)."""
        i, j = first[b]
        return next(
            (k for k in range(len(levels) - 1, skip - 1, -1) if levels[k][i] != levels[k][j]), -1
        )

    def crossed(b: int) -> frozenset[tuple[str, int, int]]:
        """The uplinks that make block ``b`` (its pairs differ in those below)."""
        k = top(b)
        if k < 0:
            return frozenset()
        i, j = first[b]
        return frozenset({("out", k, int(levels[k][i])), ("in", k, int(levels[k][j]))})

    def shift(b: int) -> int:
        """How far along its level block ``b`` goes: 1 first, which closes cycles."""
        k = top(b)
        i, j = first[b]
        return int((levels[k][j] - levels[k][i]) % (int(levels[k].max()) + 1)) if k >= 0 else 0

    items = {b: crossed(b) for b in rank}
    covered: set[tuple[str, int, int]] = set()
    keep = {b for b in rank if not items[b]}  # the blocks within a group
    by_shift = sorted(rank, key=shift)  # stable: rank's order among equal shifts
    for all_new, order in ((True, by_shift), (False, rank)):  # only new uplinks first
        for b in order:
            if b in keep or not items[b]:
                continue
            fresh = items[b] - covered
            if fresh and (not all_new or fresh == items[b]):
                keep.add(b)
                covered |= items[b]
    return [b for b in rank if b in keep]


def _host_labels(network: Network) -> NDArray[np.int64]:
    """The host of every process (every process its own host when none are known)."""
    if network.hosts is None:
        return np.arange(network.n, dtype=np.int64)
    from rankopt.probe._topology import host_labels

    return np.asarray(host_labels(network.hosts), dtype=np.int64)


def pair_uses(network: Network) -> Callable[[int, int], set[tuple[Any, ...]]]:
    """What a transfer from ``i`` to ``j`` occupies: ``uses(i, j)`` is a set.

    Its two hosts (a process's host link), at every level of the hierarchy
    where the pair leaves its group the group's uplink out and the other
    group's uplink in, and the core when it joins two top-level groups of the
    stored hierarchy or of the latency tiers (all hosts when the latency shows
    no tier, or the network has no hierarchy): the probe's bandwidth schedule
    (:func:`rankopt.probe.schedule.bandwidth_slots`) assumes the top-level
    groups it sees in the latency share one core and measured such pairs one
    at a time, and so does a check of what it stored. Two transfers whose sets do not meet can be
    measured side by side and each still sees what it would see alone.

    Examples
    --------
    >>> rack = np.array([0, 0, 1, 1])
    >>> lat = np.where(rack[:, None] == rack[None, :], 1e-5, 5e-5)  # racks show in latency
    >>> uses = pair_uses(Network.from_matrices(lat, groups=[rack]))
    >>> bool(uses(0, 1) & uses(2, 3)), bool(uses(0, 2) & uses(1, 3)), bool(uses(0, 2) & uses(3, 1))
    (False, True, True)
    >>> flat = pair_uses(Network.from_matrices(np.full((4, 4), 1e-5), groups=[rack]))
    >>> bool(flat(0, 1) & flat(2, 3))  # no latency tier: the probe measured every pair alone
    True
    """
    from rankopt.probe._topology import infer_link_levels

    host_of = _host_labels(network)
    levels = [np.asarray(g) for g in (network.groups or [])]
    names = [str(h) for h in host_of] if network.hosts is None else list(network.hosts)
    try:  # the top level the probe's own schedule saw: latency tiers, else the hosts
        tier = infer_link_levels(network.latency, names)[-1]
    except RankoptInputError:  # no tiers to read: every pair of two hosts
        tier = host_of

    def uses(i: int, j: int) -> set[tuple[Any, ...]]:
        out: set[tuple[Any, ...]] = {("h", int(host_of[i])), ("h", int(host_of[j]))}
        for k, lab in enumerate(levels):
            if lab[i] != lab[j]:
                out.add(("out", k, int(lab[i])))
                out.add(("in", k, int(lab[j])))
        if not levels or levels[-1][i] != levels[-1][j] or tier[i] != tier[j]:
            out.add(("core",))
        return out

    return uses


@dataclass(frozen=True)
class CheckResult:
    """What :func:`compare` found.

    Attributes
    ----------
    verdict : str
        :data:`HOLDS` or :data:`CHANGED`.
    latency_change : float
        Median ratio now / stored over all pairs, minus 1.
    pairs : list of dict
        Every sampled bandwidth pair: ``src``, ``dst``, ``stored``, ``now``
        (bytes/s), ``ratio``, ``moved``.
    now : Network
        The network as it is now (stored blocks scaled by their samples).
    stored_speedup, now_speedup : float
        The stored order vs the launch order, modelled on the stored network
        and on the network now.
    resolved_speedup, resolved_interval :
        The order solved now vs the stored order, modelled on the network now,
        and its 90% interval.
    pays : bool
        Whether re-ordering would pay (the interval lies above 1).
    resolved_order : list of int
    """

    verdict: str
    latency_change: float
    pairs: list[dict[str, Any]]
    now: Network
    stored_speedup: float
    now_speedup: float
    resolved_speedup: float
    resolved_interval: tuple[float, float]
    pays: bool
    resolved_order: list[int]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (without the network)."""
        return {
            "format": "rankopt.check/1",
            "verdict": self.verdict,
            "latency_change": self.latency_change,
            "pairs": self.pairs,
            "stored_speedup": self.stored_speedup,
            "now_speedup": self.now_speedup,
            "resolved_speedup": self.resolved_speedup,
            "resolved_interval": list(self.resolved_interval),
            "pays": self.pays,
            "resolved_order": self.resolved_order,
            "notes": self.notes,
        }

    def text(self, hosts: Sequence[str] | None = None) -> str:
        """The report ``rankopt check`` prints."""

        from rankopt.units import format_rate

        def name(i: int) -> str:
            return f"{i} ({hosts[i]})" if hosts else str(i)

        moved = [p for p in self.pairs if p["moved"]]
        k = len(self.pairs)
        pairs = f"{k} pair{'' if k == 1 else 's'}"
        change = self.latency_change
        if abs(change) < 0.005:
            lat = "as stored (median over every pair)"
        else:
            lat = (
                f"{abs(change):.0%} {'higher' if change > 0 else 'lower'} than stored "
                "(median over every pair)"
            )
        lines = [
            f"network: {self.verdict.upper()}"
            + (f" ({len(moved)} of {pairs} sampled moved)" if moved else ""),
            f"  latency      : {lat}",
            f"  bandwidth    : {pairs} sampled, "
            + (f"{len(moved)}" if moved else "none")
            + f" moved beyond {TOLERANCE:.0%} and their noise",
        ]
        for p in sorted(self.pairs, key=lambda p: abs(np.log(p["ratio"])), reverse=True)[:6]:
            lines.append(
                f"    {name(p['src'])} -> {name(p['dst'])}: {format_rate(p['stored'])} -> "
                f"{format_rate(p['now'])} ({p['ratio']:.2f}x){'  MOVED' if p['moved'] else ''}"
            )
        lo, hi = self.resolved_interval
        lines += [
            f"  stored order : {self.stored_speedup:.3g}x vs launch when solved, "
            f"{self.now_speedup:.3g}x on the network now (modelled)",
            f"  re-solved    : {self.resolved_speedup:.3g}x vs the stored order "
            f"(90% interval {lo:.3g}-{hi:.3g}x): re-ordering "
            + ("WOULD PAY" if self.pays else "would not pay"),
        ]
        lines += [f"  note         : {n}" for n in self.notes]
        return "\n".join(lines)


def _sigma_own(spread: Any, samples: Any, values: NDArray[np.float64]) -> NDArray[np.float64]:
    if spread is None:
        return np.zeros_like(values)
    cnt = np.ones_like(values) if samples is None else np.maximum(np.asarray(samples), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.4826 * np.asarray(spread) / values / np.sqrt(cnt)
    return np.where(np.isfinite(out), out, 0.0)


def bandwidth_moved(ratio: float, sigma: float, tolerance: float = TOLERANCE) -> bool:
    """Whether a bandwidth sampled at ``ratio`` times its stored value moved.

    It moved when ``|log ratio|`` exceeds both ``log(1 + tolerance)`` and three
    times the noise of the difference of two samples of relative noise
    ``sigma`` (:func:`_sigma_own`); a ratio that is not positive always moved.

    Examples
    --------
    >>> bandwidth_moved(0.9, 0.0), bandwidth_moved(0.6, 0.0), bandwidth_moved(0.6, 0.3)
    (False, True, False)
    """
    if not ratio > 0:
        return True
    return bool(abs(math.log(ratio)) > max(math.log1p(tolerance), 3.0 * math.hypot(sigma, sigma)))


def compare(
    stored: Network,
    latency: ArrayLike,
    samples: Mapping[tuple[int, int], float],
    *,
    order: ArrayLike | None = None,
    latency_spread: ArrayLike | None = None,
    tolerance: float = TOLERANCE,
    solve_options: Mapping[str, Any] | None = None,
) -> CheckResult:
    """Compare ``stored`` with a re-probe: ``latency`` (n x n) and sampled bandwidths.

    Parameters
    ----------
    stored : Network
        The network the order was solved on.
    latency : array_like (n, n)
        Latency measured now.
    samples : mapping
        ``{(src, dst): bytes/s}`` measured now (:func:`choose_pairs`).
    order : array_like of int, optional
        The stored order (default: the launch order).
    latency_spread : array_like, optional
        MAD of the new latency samples.
    tolerance : float
        Relative change below which an entry holds whatever its noise.
    solve_options : mapping, optional
        For :func:`rankopt.solve` on the network now (defaults: the default path);
        its ``collective``, ``algorithm`` and ``nbytes`` also price the stored
        order (default: a ring allreduce at the network's message size).
    """
    from rankopt.models.robust import speedup_interval
    from rankopt.solvers.solve import solve

    n = stored.n
    lat_now = np.asarray(latency, dtype=np.float64)
    off = ~np.eye(n, dtype=bool)
    good = off & (stored.latency > 0) & (lat_now > 0)
    lat_change = float(np.median(lat_now[good] / stored.latency[good])) - 1.0 if good.any() else 0.0
    notes: list[str] = []
    base = np.arange(n) if order is None else np.asarray(order, dtype=np.int64)
    pairs: list[dict[str, Any]] = []
    now_bw = None
    if stored.bandwidth is not None:
        sig = _sigma_own(stored.bandwidth_spread, stored.bandwidth_samples, stored.bandwidth)
        blocks = alike_blocks(stored.groups, n, stored.hosts)
        scale: dict[int, list[float]] = {}
        for (i, j), value in samples.items():
            old = float(stored.bandwidth[i, j])
            ratio = float(value) / old if old > 0 else float("inf")
            moved = bandwidth_moved(ratio, float(sig[i, j]), tolerance)
            pairs.append(
                {
                    "src": int(i),
                    "dst": int(j),
                    "stored": old,
                    "now": float(value),
                    "ratio": ratio,
                    "moved": bool(moved),
                }  # fmt: skip
            )
            if moved:
                scale.setdefault(int(blocks[i, j]), []).append(ratio)
        now_bw = np.array(stored.bandwidth, dtype=np.float64)
        for b, ratios in scale.items():
            now_bw[blocks == b] *= float(np.median(ratios))
    moved_any = any(p["moved"] for p in pairs)
    lat_moved = abs(np.log1p(lat_change)) > np.log1p(tolerance)
    lat_matters = lat_moved
    if lat_moved:
        # a latency change counts when it changes what the job pays: the stored
        # order's modelled time, priced with the latency now
        opts0 = dict(solve_options or {})
        before = _cost(stored, stored.latency, base, opts0)
        after = _cost(stored, lat_now, base, opts0)
        effect = after / before - 1.0 if before > 0 else 0.0
        lat_matters = abs(np.log1p(effect)) > np.log1p(tolerance)
        notes.append(
            f"latency moved {lat_change:+.0%} in the median, the stored order's modelled "
            f"time {effect:+.0%}"
            + ("" if lat_matters else " (within tolerance: the latency does not change it)")
        )
    verdict = CHANGED if moved_any or lat_matters else HOLDS
    now = replace(
        stored,
        latency=lat_now if lat_moved else stored.latency,
        bandwidth=now_bw,
        latency_spread=(
            None if latency_spread is None else np.asarray(latency_spread, dtype=np.float64)
        )
        if lat_moved
        else stored.latency_spread,
        source="check",
    )
    if stored.groups:
        now = now.with_hierarchy(stored.groups)
    opts = dict(solve_options or {})
    stored_speedup = _modelled(stored, base, opts)
    now_speedup = _modelled(now, base, opts)
    # re-solve with the stored order as the launch: the gain of re-ordering itself
    perm = _relabel(now, base)
    res = solve(perm, **opts)
    model = perm.default_model(nbytes=opts.get("nbytes"))
    if res.speedup_interval is not None:
        lo, hi = res.speedup_interval
    else:
        lo, hi = speedup_interval(perm, res.order, model=model) if perm.measured else (1.0, 1.0)
    resolved = base[res.order]
    pays = bool(lo > 1.0) and res.stop_reason != "launch_order_kept"
    return CheckResult(
        verdict=verdict,
        latency_change=lat_change,
        pairs=pairs,
        now=now,
        stored_speedup=stored_speedup,
        now_speedup=now_speedup,
        resolved_speedup=float(res.speedup),
        resolved_interval=(float(lo), float(hi)),
        pays=pays,
        resolved_order=[int(x) for x in resolved],
        notes=notes,
    )


def _cost(
    network: Network, latency: NDArray[Any], order: NDArray[np.int64], opts: Mapping[str, Any]
) -> float:
    """Modelled time of ``order`` on ``network`` with ``latency`` (the default model)."""
    from rankopt.models import make_model

    kw = network.default_model(nbytes=opts.get("nbytes"))
    m = make_model(latency, *_call(opts), **kw)
    return float(m.cost(order))


def _call(opts: Mapping[str, Any]) -> tuple[str, str]:
    """The collective and algorithm the order was solved for (default: a ring allreduce)."""
    return str(opts.get("collective", "allreduce")), str(opts.get("algorithm", "ring"))


def _modelled(network: Network, order: NDArray[np.int64], opts: Mapping[str, Any]) -> float:
    """Modelled speedup of ``order`` over the launch order on ``network`` (the default
    model; averaged over time with the load on and off where the probe saw it come and
    go, as ``solve`` prices it: :func:`rankopt.models.robust.over_time`)."""
    from rankopt.models import make_model
    from rankopt.models.robust import loaded_phase_model, over_time

    kw = network.default_model(nbytes=opts.get("nbytes"))
    m = make_model(network.latency, *_call(opts), **kw)
    launch = np.arange(network.n)
    c, b = float(m.cost(order)), float(m.cost(launch))
    on = loaded_phase_model(network, network.latency, *_call(opts), kw)
    if on is not None and c > 0 and b > 0:
        c, b = over_time(c, float(on.cost(order))), over_time(b, float(on.cost(launch)))
    return b / c if c > 0 else 1.0


def _relabel(network: Network, order: NDArray[np.int64]) -> Network:
    """``network`` with process ``order[k]`` renumbered ``k`` (the stored order as launch)."""
    from rankopt.probe._common import remapped_parameters

    ix = np.ix_(order, order)

    def sub(a: Any) -> Any:
        return None if a is None else np.asarray(a)[ix]

    provenance = dict(network.provenance)
    if isinstance(provenance.get("probe"), Mapping):  # rows that name processes, renumbered
        provenance["probe"] = remapped_parameters(provenance["probe"], order)
    return replace(
        network,
        provenance=provenance,
        latency=network.latency[ix],
        bandwidth=sub(network.bandwidth),
        latency_spread=sub(network.latency_spread),
        bandwidth_spread=sub(network.bandwidth_spread),
        latency_samples=sub(network.latency_samples),
        bandwidth_samples=sub(network.bandwidth_samples),
        hosts=None if network.hosts is None else tuple(network.hosts[int(k)] for k in order),
        groups=tuple(np.asarray(g)[order] for g in network.groups),
        uplinks=network.uplinks,
    )
