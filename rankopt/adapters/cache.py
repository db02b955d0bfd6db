"""The probe cache: a finished probe kept for the next launch on the same machines.

A probe costs seconds to minutes; the network of a set of machines changes far
less often than a job is launched on them. With a cache, the first launch
probes as usual and its root stores the measurement; a later launch of the same
engine on the same hosts (the same number of processes on each) reuses it after
a cheap **drift check**, the pairs that ``rankopt check`` samples: one pair per
block of alike pairs of the stored network (same host, same rack, rack to rack
in each direction ...), each measured alone -- a few ping-pongs and a few
transfers of about :data:`CHECK_SECONDS` at the stored rate. The stored
measurement is used when every sampled pair agrees with it; the probe runs in
full (and replaces the entry) when one moved, when the entry is older than
``max_age``, or when asked to (``reprobe``). The measurement returned says
which happened in ``parameters["cache"]``.

Contents
--------
ProbeCache
    Where the entries live, how old one may be, whether to re-probe anyway;
    passed as ``cache=`` to :func:`rankopt.probe.mpi.measure` or
    :func:`rankopt.probe.torch.measure`, it runs the probe through the cache.
resolve_cache
    Normalise a ``cache=`` argument (None, bool, folder, mapping, ProbeCache).
cache_key
    The key of an entry: engine, the sorted host names of all processes and
    the probe settings that change what it measures.
probe_with_cache
    The collective: look up, check, reuse or probe and store.
network_of
    The network of a measurement: the one the root built when it stored a
    fresh probe, else a new one.

Entries are ``.npz`` measurement files (:meth:`Measurement.save`), written
atomically by the root alone, so a crash never leaves a partial entry. The
processes of one host are taken as interchangeable: the k-th process of host
``h`` now takes the stored rows of the k-th process of ``h`` then.

Drift rule
----------
A sampled bandwidth moved when ``|log(now / stored)|`` exceeds
``max(log(1 + TOLERANCE), 3 sigma)``, ``sigma`` the stored entry's relative
noise (the rule of :func:`rankopt.adapters.drift.compare`); a sampled latency
moved when it is more than :data:`LATENCY_FACTOR` times off in either direction
and by more than :data:`LATENCY_FLOOR` (a handful of ping-pongs is noisy, a
changed route is a step of that size), and counts only when it changes what
the job pays: the launch order's time on the network's default model, with
each moved pair's block of alike pairs scaled, off by more than
:data:`TOLERANCE` (the rule of ``rankopt check``).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.adapters.drift import TOLERANCE, _sigma_own, bandwidth_moved
from rankopt.probe._common import ProbeParams, ProbeProgress, remapped_parameters, transfer_seconds
from rankopt.probe.measurement import Measurement

__all__ = [
    "ProbeCache",
    "probe_arguments",
    "resolve_cache",
    "cache_key",
    "probe_with_cache",
    "network_of",
    "default_directory",
    "CACHE_ENV",
    "DEFAULT_MAX_AGE",
]

logger = logging.getLogger("rankopt.probe")

#: Environment variable naming the cache folder (overrides the user cache folder).
CACHE_ENV = "RANKOPT_CACHE_DIR"
#: Default oldest entry reused, in seconds (one day).
DEFAULT_MAX_AGE = 24 * 3600.0
#: Most pairs the drift check samples.
CHECK_PAIRS = 12
#: Target duration of one sampled transfer, in seconds (at the stored rate).
CHECK_SECONDS = 0.015
#: Timed ping-pongs per sampled pair (after one warm-up), as many as the probe's default.
CHECK_PINGS = 10
#: Timed transfers per sampled pair (after a warm-up of at most ``WARMUP_BYTES``, as in the probe).
CHECK_REPEATS = 2
#: Factor beyond which a sampled latency moved ...
LATENCY_FACTOR = 2.0
#: ... when it moved by more than this many seconds too (timer and scheduling noise
#: of a few ping-pongs on a busy host; a changed route or zone is far larger).
LATENCY_FLOOR = 25e-6
FORMAT = "rankopt.probe-cache/1"
_TAGS_LAT = (0x7A20, 0x7A21)
_MISS, _CHECK = 0, 1
_ROOTS = 1 << 40  # above any rank + 1: the sum that says every process named one root
#: Settings that change what a probe measures (the rest only change its cost).
_KEYED = (
    "bandwidth",
    "bandwidth_mode",
    "latency_mode",
    "latency_bytes",
    "bandwidth_bytes",
    "bw_concurrency",
    "uplink_flows",
)


def default_directory() -> Path:
    """``$RANKOPT_CACHE_DIR``, else ``$XDG_CACHE_HOME/rankopt/probes``, else ``~/.cache/...``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rankopt" / "probes"


@dataclass(frozen=True)
class ProbeCache:
    """Where probe results are kept and when one is reused.

    Parameters
    ----------
    directory : path-like, optional
        Folder of the entries (default: :func:`default_directory`).
    max_age : float
        Oldest entry reused, in seconds (default one day); older ones are
        probed again and replaced.
    reprobe : bool
        Probe in full whatever the entry, and replace it.

    Examples
    --------
    >>> from rankopt.adapters.cache import ProbeCache
    >>> ProbeCache("/tmp/x", max_age=3600).max_age
    3600.0
    """

    directory: Path | str | None = None
    max_age: float = DEFAULT_MAX_AGE
    reprobe: bool = False

    def __post_init__(self) -> None:
        directory = default_directory() if self.directory is None else Path(self.directory)
        object.__setattr__(self, "directory", directory)
        age = self.max_age
        if isinstance(age, bool) or not isinstance(age, (int, float, np.integer, np.floating)):
            raise RankoptInputError(f"`max_age` must be a number of seconds; got {age!r}.")
        if not age >= 0 or not math.isfinite(float(age)):
            raise RankoptInputError(f"`max_age` must be finite and >= 0; got {age!r}.")
        object.__setattr__(self, "max_age", float(age))
        object.__setattr__(self, "reprobe", bool(self.reprobe))

    def path(self, key: str) -> Path:
        """The entry file of ``key``."""
        return Path(str(self.directory)) / f"{key}.npz"

    def __call__(
        self,
        tr: Any,
        params: ProbeParams,
        callback: Callable[[ProbeProgress], Any] | None,
        *,
        backend: str,
        hostname: str,
        root: int | None = None,
        topology: Any = None,
    ) -> Measurement | None:
        """Run the probe over the transport ``tr`` through this cache (:func:`probe_with_cache`)."""
        return probe_with_cache(
            tr,
            params,
            self,
            callback,
            backend=backend,
            hostname=hostname,
            root=root,
            topology=topology,
        )


def resolve_cache(value: Any) -> ProbeCache | None:
    """A :class:`ProbeCache` from a ``cache=`` argument, or None (no cache).

    ``None``/``False``: no cache; ``True``: the default folder; a path: that
    folder; a mapping: :class:`ProbeCache` keywords; a :class:`ProbeCache`.

    Examples
    --------
    >>> from rankopt.adapters.cache import resolve_cache
    >>> resolve_cache(False) is None, resolve_cache({"directory": "/tmp/c"}).directory.name
    (True, 'c')
    """
    if value is None or value is False:
        return None
    if value is True:
        return ProbeCache()
    if isinstance(value, ProbeCache):
        return value
    if isinstance(value, (str, os.PathLike)):
        return ProbeCache(os.fspath(value))
    if isinstance(value, Mapping):
        unknown = set(value) - {"directory", "max_age", "reprobe"}
        if unknown:
            raise RankoptInputError(
                f"`cache` takes the keys directory, max_age and reprobe; got {sorted(unknown)}."
            )
        return ProbeCache(**dict(value))
    raise RankoptInputError(
        f"`cache` must be None, a bool, a folder, a mapping or a ProbeCache; got {value!r}."
    )


def probe_arguments(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments of a probe's ``measure`` from an entry point's probe options.

    A ``"cache"`` entry (what :func:`resolve_cache` accepts) becomes the
    :class:`ProbeCache` that runs the probe, or is dropped when it is off.

    Examples
    --------
    >>> probe_arguments({"repeats": 3, "cache": False})
    {'repeats': 3}
    >>> type(probe_arguments({"cache": "/tmp/x"})["cache"]).__name__
    'ProbeCache'
    """
    out = dict(options or {})
    if "cache" in out:
        cache = resolve_cache(out.pop("cache"))
        if cache is not None:
            out["cache"] = cache
    return out


def cache_key(
    backend: str,
    hosts: tuple[str, ...] | list[str],
    params: ProbeParams,
    *,
    topology: Any = None,
) -> str:
    """The entry key: engine, the sorted host names of all processes, the keyed settings.

    Examples
    --------
    >>> from rankopt.probe._common import ProbeParams
    >>> a = cache_key("mpi", ["b", "a", "a"], ProbeParams())
    >>> a == cache_key("mpi", ["a", "b", "a"], ProbeParams(repeats=3)), len(a)
    (True, 32)
    >>> a == cache_key("gloo", ["a", "a", "b"], ProbeParams())
    False
    """
    import hashlib

    settings = params.as_dict()
    payload = {
        "format": FORMAT,
        "backend": str(backend),
        "hosts": sorted(str(h) for h in hosts),
        "settings": {k: settings[k] for k in _KEYED},
    }
    if topology is not None:  # a probe run on the provider's groups is kept apart
        payload["topology"] = topology.fingerprint()
    blob = json.dumps(payload, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def match_ranks(stored: tuple[str, ...], now: tuple[str, ...]) -> NDArray[np.int64] | None:
    """``idx[r]``: the stored process whose rows rank ``r`` takes now (None if none fits).

    The k-th process of each host now is the k-th process of that host then.

    Examples
    --------
    >>> match_ranks(("a", "b", "a"), ("b", "a", "a")).tolist()
    [1, 0, 2]
    >>> match_ranks(("a", "b"), ("a", "a")) is None
    True
    """
    if len(stored) != len(now) or sorted(stored) != sorted(now):
        return None
    slots: dict[str, list[int]] = {}
    for q, h in enumerate(stored):
        slots.setdefault(h, []).append(q)
    taken: dict[str, int] = {}
    idx = np.empty(len(now), dtype=np.int64)
    for r, h in enumerate(now):
        k = taken.get(h, 0)
        idx[r] = slots[h][k]
        taken[h] = k + 1
    return idx


def _remapped(m: Measurement, idx: NDArray[np.int64], hosts: tuple[str, ...]) -> Measurement:
    if tuple(hosts) == m.hosts and np.array_equal(idx, np.arange(len(idx))):
        return m  # the launch numbered the processes as the stored one did
    ix = np.ix_(idx, idx)

    def sub(a: Any) -> Any:
        return None if a is None else np.asarray(a)[ix]

    return Measurement(
        latency=m.latency[ix],
        bandwidth=sub(m.bandwidth),
        hosts=hosts,
        latency_spread=sub(m.latency_spread),
        bandwidth_spread=sub(m.bandwidth_spread),
        pair_counts=sub(m.pair_counts),
        bandwidth_counts=sub(m.bandwidth_counts),
        started_at=m.started_at,
        finished_at=m.finished_at,
        backend=m.backend,
        parameters=remapped_parameters(m.parameters, idx),
    )


def _lookup(
    cache: ProbeCache, key: str, hosts: tuple[str, ...], backend: str
) -> tuple[Measurement | None, str]:
    """The stored measurement in the ranks of now, or None and why not."""
    from rankopt.probe.measurement import load_measurement

    if cache.reprobe:
        return None, "a fresh probe was asked for (reprobe)"
    path = cache.path(key)
    if not path.exists():
        return None, "no entry for these hosts"
    try:
        stored = load_measurement(path)
    except (OSError, RankoptInputError) as exc:
        return None, f"the entry could not be read ({exc})"
    age = time.time() - stored.finished_at
    if age > cache.max_age:
        return None, f"the entry is {age:.0f} s old, more than the {cache.max_age:g} s allowed"
    if stored.backend and stored.backend != backend:
        return None, f"the entry was probed over {stored.backend}, not {backend}"
    idx = match_ranks(stored.hosts, hosts)
    if idx is None:
        return None, "the entry's processes are on other hosts"
    return _remapped(stored, idx, hosts), ""


def _check_plan(network: Any, uses: Any = None) -> list[tuple[int, int, int]]:
    """``(i, j, nbytes)``: the pairs the drift check samples, nbytes 0 for latency only.

    ``uses``: :func:`rankopt.adapters.drift.pair_uses` of ``network``, when built.
    """
    from rankopt.adapters.drift import choose_pairs

    pairs = choose_pairs(network, max_pairs=CHECK_PAIRS, cover=True, uses=uses)
    out = []
    bandwidth = network.bandwidth
    for i, j in pairs:
        nbytes = 0
        if bandwidth is not None and bandwidth[i, j] > 0:
            nbytes = int(np.clip(CHECK_SECONDS * float(bandwidth[i, j]), 1 << 16, 8 << 20))
        out.append((int(i), int(j), nbytes))
    return out


def _verdict(
    m: Any, plan: list[tuple[int, int, int]], lat: NDArray[np.float64], bw: NDArray
) -> tuple[bool, list[dict[str, Any]]]:
    """Whether every sampled pair holds against the network ``m``, and a record of each.

    ``m`` is the stored network (:meth:`Network.from_measurement`): its
    bandwidth is what a pair gets alone on the network, as the check measures.
    """
    records, holds = [], True
    for (i, j, nbytes), now_lat, now_bw in zip(plan, lat, bw, strict=True):
        rec: dict[str, Any] = {"src": i, "dst": j, "latency": float(now_lat)}
        old_lat = float(m.latency[i, j])
        if old_lat > 0 and now_lat > 0:
            ratio = now_lat / old_lat
            rec["latency_ratio"] = ratio
            far = abs(now_lat - old_lat) > LATENCY_FLOOR
            if far and not 1.0 / LATENCY_FACTOR <= ratio <= LATENCY_FACTOR:
                rec["moved"], holds = True, False
        if nbytes and m.bandwidth is not None:
            old = float(m.bandwidth[i, j])
            ratio = float(now_bw) / old if old > 0 else math.inf
            spread = None if m.bandwidth_spread is None else m.bandwidth_spread[i, j]
            samples = None if m.bandwidth_samples is None else m.bandwidth_samples[i, j]
            sigma = float(_sigma_own(spread, samples, np.array(old)))
            rec.update(bandwidth=float(now_bw), bandwidth_ratio=ratio)
            if bandwidth_moved(ratio, sigma):
                rec["moved"] = rec["bandwidth_moved"] = True
                holds = False
        records.append(rec)
    if not holds and not any(r.get("bandwidth_moved") for r in records):
        holds = _latency_matters_not(m, plan, records)
    return holds, records


def _latency_matters_not(
    m: Any, plan: list[tuple[int, int, int]], records: list[dict[str, Any]]
) -> bool:
    """Whether the latencies that moved leave the launch order's modelled time within tolerance.

    Each moved pair scales its block of alike pairs (the stored hierarchy); the
    launch order is priced on the network's default model before and after.
    A latency that moved without changing what the job pays is noted, not acted on.
    """
    from rankopt.adapters.drift import _cost
    from rankopt.network.core import alike_blocks

    if not hasattr(m, "groups"):
        return False
    blocks = alike_blocks(m.groups, m.n, m.hosts)
    latency = np.array(m.latency, dtype=np.float64)
    for (i, j, _), rec in zip(plan, records, strict=True):
        if rec.get("moved"):
            latency[blocks == blocks[i, j]] *= rec["latency_ratio"]
    launch = np.arange(m.n)
    before = _cost(m, m.latency, launch, {})
    after = _cost(m, latency, launch, {})
    effect = after / before if before > 0 else 1.0
    for rec in records:
        if rec.get("moved"):
            rec["modelled_effect"] = effect - 1.0
    if abs(math.log(effect)) > math.log1p(TOLERANCE):
        return False
    for rec in records:
        rec["moved"] = False
    return True


def _share_int64(probe: Any, values: NDArray[np.int64], phase: str) -> NDArray[np.int64]:
    """Every process's ``values`` maxed element-wise, with the step's deadline."""
    return probe._allreduce_max(np.ascontiguousarray(values, dtype=np.int64), phase)


def _broadcast_measurement(
    probe: Any, m: Measurement | None, hosts: tuple[str, ...]
) -> Measurement:
    """The root's measurement on every process (the root passes it, the others None).

    The matrices travel as the bits of non-negative doubles in an element-wise
    max of int64 words (the others contribute zeros), the rest as JSON bytes.
    """
    n = len(hosts)
    names = ("latency", "bandwidth", "latency_spread", "bandwidth_spread")
    counts = ("pair_counts", "bandwidth_counts")
    header = np.zeros(3, dtype=np.int64)
    if m is not None:
        meta = {
            "present": [getattr(m, k) is not None for k in names + counts],
            "started_at": m.started_at,
            "finished_at": m.finished_at,
            "backend": m.backend,
            "parameters": dict(m.parameters),
        }
        blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        header[:] = (1, blob.size, 0)
    header = _share_int64(probe, header, "cache")
    size = int(header[1])
    words = np.zeros(len(names + counts) * n * n + size, dtype=np.int64)
    if m is not None:
        parts = []
        for k in names + counts:
            a = getattr(m, k)
            a = np.zeros((n, n)) if a is None else np.asarray(a, dtype=np.float64)
            parts.append(np.maximum(a, 0.0).ravel().view(np.int64))
        parts.append(blob.astype(np.int64))
        words[:] = np.concatenate(parts)
    out = _share_int64(probe, words, "cache")
    width = len(names + counts) * n * n
    meta = json.loads(out[width:].astype(np.uint8).tobytes().decode())
    arrays: dict[str, Any] = {}
    for s, name in enumerate(names + counts):
        block = out[s * n * n : (s + 1) * n * n].view(np.float64).reshape(n, n)
        arrays[name] = block.copy() if meta["present"][s] else None
    for name in counts:
        if arrays[name] is not None:
            arrays[name] = arrays[name].astype(np.int64)
    return Measurement(
        hosts=hosts,
        started_at=float(meta["started_at"]),
        finished_at=float(meta["finished_at"]),
        backend=str(meta["backend"]),
        parameters=meta["parameters"],
        **arrays,
    )


def _broadcast_json(probe: Any, value: Any) -> Any:
    """The root's JSON-able ``value`` on every process (the others pass None)."""
    blob = np.zeros(0, dtype=np.int64)
    if value is not None:
        blob = np.frombuffer(json.dumps(value).encode(), dtype=np.uint8).astype(np.int64)
    size = int(_share_int64(probe, np.array([blob.size], dtype=np.int64), "cache")[0])
    words = np.zeros(size, dtype=np.int64)
    words[: blob.size] = blob
    return json.loads(_share_int64(probe, words, "cache").astype(np.uint8).tobytes().decode())


def check_slots(
    plan: list[tuple[int, int, int]], network: Any, *, uses: Any = None
) -> list[list[int]]:
    """The planned pairs in slots of pairs that share nothing: run side by side, each alone.

    Two pairs share something when they have a host in common (a process, or
    its host's link), at a level of the stored hierarchy where a pair leaves
    its group the same group's uplink in the same direction, or both join two
    top-level groups (the core, as the probe's own schedule assumes, also of
    the latency tiers: with none, every pair runs alone; see
    :func:`rankopt.adapters.drift.pair_uses`). Pairs of one slot then see what
    they would see alone; on racks the pairs inside racks run beside the
    rack-to-rack pairs, which run one at a time. ``uses``: ``pair_uses(network)``
    when already built.

    Examples
    --------
    >>> import rankopt
    >>> rack = np.array([0, 0, 1, 1])
    >>> net = rankopt.Network.from_matrices(
    ...     np.where(rack[:, None] == rack[None, :], 1e-5, 5e-5), hosts=["a", "b", "c", "d"],
    ...     groups=[rack])
    >>> check_slots([(0, 1, 8), (2, 3, 8), (0, 2, 8), (3, 1, 8), (1, 3, 8)], net)
    [[0, 1], [2], [3], [4]]
    """
    from rankopt.adapters.drift import pair_uses

    uses = pair_uses(network) if uses is None else uses
    slots: list[list[int]] = []
    taken: list[set[tuple[Any, ...]]] = []
    for s, (i, j, _) in enumerate(plan):
        need = uses(i, j)
        for slot, busy in zip(slots, taken, strict=True):
            if not need & busy:
                slot.append(s)
                busy |= need
                break
        else:
            slots.append([s])
            taken.append(set(need))
    return slots


def _sample(
    probe: Any, plan: list[tuple[int, int, int]], slots: list[list[int]] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Measure the planned pairs, a slot of pairs that share nothing at a time.

    The same latencies and rates on every process; ``slots`` (default: one
    pair a slot) from :func:`check_slots`.
    """
    from rankopt.probe._engine import PAIR_SHARE

    me, p = probe.me, probe.p
    lat = np.zeros(len(plan), dtype=np.int64)  # nanoseconds
    bw = np.zeros(len(plan), dtype=np.int64)  # bytes/s
    small_out = np.zeros(p.latency_bytes, dtype=np.uint8)
    small_in = np.zeros(p.latency_bytes, dtype=np.uint8)
    slots = [[s] for s in range(len(plan))] if slots is None else slots
    for step, slot in enumerate(slots):
        t0 = probe.epoch
        if probe.hooks.stall_round == step + 1:  # the test hook: this process stops here
            probe.hooks.stall()
        deadline = t0 + PAIR_SHARE * p.timeout
        failed = -1
        mine = [s for s in slot if me in plan[s][:2]]
        if not mine:
            probe._consensus("cache", step, len(slots), t0, failed, [plan[s][:2] for s in slot])
            continue
        s = mine[0]  # a process is in one pair of a slot
        i, j, nbytes = plan[s]
        big = np.zeros(nbytes, dtype=np.uint8) if nbytes else None
        if me == i:
            rtt = probe._initiate(j, small_out, small_in, _TAGS_LAT, CHECK_PINGS, deadline)
            one_way = float(np.median(rtt)) / 2.0 if rtt is not None else 0.0
            took = None
            if rtt is not None and big is not None:
                # as in the probe: announced transfers, the warm-up of at most WARMUP_BYTES
                took = probe._send_announced(
                    j, big, CHECK_REPEATS, deadline, probe._warmup(None), one_way
                )
            if rtt is None or (big is not None and took is None):
                failed = j
            else:
                lat[s] = max(int(one_way * 1e9), 1)
                if took is not None:
                    elapsed = float(np.median(took))
                    bw[s] = int(nbytes / transfer_seconds(elapsed, one_way))
        elif me == j:
            ok = probe._respond(i, small_in, small_out, _TAGS_LAT, CHECK_PINGS, deadline)
            if ok and big is not None:
                ok = probe._receive_announced(i, big, deadline, probe._warmup(None) + CHECK_REPEATS)
            if not ok:
                failed = i
        probe._consensus("cache", step, len(slots), t0, failed, [plan[s][:2] for s in slot])
    both = _share_int64(probe, np.concatenate([lat, bw]), "cache")
    k = len(plan)
    return both[:k].astype(np.float64) / 1e9, both[k:].astype(np.float64)


#: What a drift check's record keeps of a first look that a second look overruled.
_LOOKED = ("latency", "latency_ratio", "bandwidth", "bandwidth_ratio")


def probe_with_cache(
    tr: Any,
    params: ProbeParams,
    cache: ProbeCache,
    callback: Callable[[ProbeProgress], Any] | None,
    *,
    backend: str,
    hostname: str,
    root: int | None = None,
    topology: Any = None,
) -> Measurement | None:
    """Reuse the cached probe of these hosts after a drift check, else probe and store it.

    Collective over the transport ``tr``, with the deadlines and failure reports
    of the probe itself. Returns the same :class:`Measurement` on every process.
    With ``root`` 0 (the same on every process; the caller reads the result on
    rank 0 only) a kept probe stays on rank 0 and the others get None; with
    another root every process gets it, as without one. Its
    ``parameters["cache"]`` says what happened: ``status`` ``"hit"`` (the entry
    held: ``age_s``, ``check_s``, the sampled ``pairs``) or ``"probed"`` (with
    the ``reason``: no entry, too old, asked for, or the pairs that moved).
    Pairs that moved are measured a second time before the entry is dropped
    (``second_look``, their count): only a pair that moved on both looks counts
    (its record then holds the second; ``first_look`` keeps the first), so a
    process kept busy for a moment by others starting on its cores does not
    cost a whole probe. Only the root (rank 0) reads and writes the cache folder.
    """
    from rankopt.probe._engine import _Probe, run_probe

    t_begin = time.perf_counter()
    probe = _Probe(tr, params, callback, backend, hostname, topology)
    hosts, _ = probe._start()
    me = probe.me
    key = cache_key(backend, hosts, params, topology=topology)
    stored: Measurement | None = None
    network: Any = None
    reason = ""
    plan: list[tuple[int, int, int]] = []
    if me == 0:
        try:
            stored, reason = _lookup(cache, key, hosts, backend)
            if stored is not None:
                from rankopt.adapters.drift import pair_uses
                from rankopt.network.core import Network

                network = Network.from_measurement(stored)
                uses = pair_uses(network)  # the latency tiers, read once for plan and slots
                plan = _check_plan(network, uses)
        except Exception as exc:  # noqa: BLE001 - a broken entry never stops the job
            stored, reason = None, f"the entry could not be used ({type(exc).__name__}: {exc})"
    decision = np.zeros(4 + 4 * CHECK_PAIRS, dtype=np.int64)
    # the root every process names: max and (-min) of (root + 1) come back
    decision[-2:] = (0 if root is None else root + 1), _ROOTS - (0 if root is None else root + 1)
    if me == 0 and stored is not None and plan:
        slot_of = np.zeros(len(plan), dtype=np.int64)
        for k, slot in enumerate(check_slots(plan, network, uses=uses)):
            slot_of[slot] = k
        decision[0], decision[1] = _CHECK, len(plan)
        rows4 = np.column_stack([np.array(plan, dtype=np.int64), slot_of])
        decision[2 : 2 + 4 * len(plan)] = rows4.ravel()
    decision = _share_int64(probe, decision, "cache")
    if int(decision[-2]) + int(decision[-1]) != _ROOTS:
        raise RankoptInputError(
            "`root` differs between processes: every process of the probe must name the same "
            f"root (rank {me} named {root!r})."
        )
    info: dict[str, Any] = {"key": key, "directory": str(cache.directory)}
    if decision[0] == _CHECK:
        count = int(decision[1])
        rows = decision[2 : 2 + 4 * count].reshape(-1, 4)
        plan = [(int(a), int(b), int(c)) for a, b, c, _ in rows]
        slots = [np.flatnonzero(rows[:, 3] == k).tolist() for k in range(int(rows[:, 3].max()) + 1)]
        t_check = time.perf_counter()
        slots = [s for s in slots if s]
        lat, bw = _sample(probe, plan, slots)
        verdict = np.zeros(1 + len(plan), dtype=np.int64)  # holds, then the pairs that moved
        records: list[dict[str, Any]] = []
        if me == 0 and stored is not None:
            holds, records = _verdict(network, plan, lat, bw)
            verdict[0] = 1 if holds else 0
            verdict[1:] = [1 if r.get("moved") else 0 for r in records]
        verdict = _share_int64(probe, verdict, "cache")
        moved_at = np.flatnonzero(verdict[1:]).tolist()
        if verdict[0] == 0 and moved_at:
            # a second look at the pairs that moved: a process busy for a moment
            # (other processes starting on its cores) is not a changed network
            again = [plan[k] for k in moved_at]
            where = {k: pos for pos, k in enumerate(moved_at)}
            again_slots = [[where[k] for k in slot if k in where] for slot in slots]
            lat2, bw2 = _sample(probe, again, [s for s in again_slots if s])
            second_holds = np.zeros(1, dtype=np.int64)
            if me == 0 and stored is not None:
                holds, second = _verdict(network, again, lat2, bw2)
                second_holds[0] = 1 if holds else 0
                for k, rec in zip(moved_at, second, strict=True):
                    first = {key: records[k][key] for key in _LOOKED if key in records[k]}
                    records[k] = rec | {"first_look": first}
            verdict[0] = _share_int64(probe, second_holds, "cache")[0]
        check_s = time.perf_counter() - t_check
        if me == 0 and stored is not None:
            info |= {"age_s": time.time() - stored.finished_at, "check_s": check_s}
            info["pairs"] = records
            if moved_at:
                info["second_look"] = len(moved_at)
            if not verdict[0]:
                moved = [f"({r['src']}, {r['dst']})" for r in records if r.get("moved")]
                reason = "the drift check found pairs that moved: " + ", ".join(moved)
                if moved_at:
                    reason += " (on a second look too)"
        if verdict[0] == 1:
            hit = None
            if me == 0 and stored is not None:
                info |= {"status": "hit", "seconds": time.perf_counter() - t_begin}
                hit = _with_cache_info(stored, info)
                # the network built for the check is the caller's: not built twice
                net = copy.copy(network)
                object.__setattr__(
                    net, "provenance", {**network.provenance, "probe": dict(hit.parameters)}
                )
                _BUILT[id(hit)] = (weakref.ref(hit, _forget(id(hit))), net)
            if root == 0:  # only the root reads it: the kept probe is not sent
                if hit is not None:
                    _log(hit)
                return hit
            result = _broadcast_measurement(probe, hit, hosts)
            result = result if hit is None else hit  # the root's own: its network is built
            _log(result)
            return result
    info |= {"status": "probed", "reason": reason or "no entry for these hosts"}
    info = _broadcast_json(probe, info if me == 0 else None)  # the root's word on every process
    fresh = run_probe(tr, params, callback, backend=backend, hostname=hostname, topology=topology)
    result = _with_cache_info(fresh, info)
    if me == 0:
        try:
            built = None
            if not fresh.parameters.get("groups"):  # the hierarchy to keep is inferred: build
                from rankopt.network.core import Network

                built = Network.from_measurement(result)  # the network the caller solves on
                _BUILT[id(result)] = (weakref.ref(result, _forget(id(result))), built)
            cache.path(key).parent.mkdir(parents=True, exist_ok=True)
            _with_hierarchy_kept(fresh, built).save(cache.path(key))
        except (OSError, RankoptInputError) as exc:
            logger.warning("rankopt: the probe could not be cached in %s: %s", cache.directory, exc)
    _log(result)
    return result


def _with_hierarchy_kept(m: Measurement, network: Any = None) -> Measurement:
    """``m`` with the hierarchy its network infers, so a hit need not infer it again.

    ``network``: the network of ``m`` when already built (its hierarchy is
    the one kept); built here otherwise.
    """
    if m.parameters.get("groups"):  # the probe found its groups itself
        return m
    if network is None:
        from rankopt.network.core import Network

        network = Network.from_measurement(m)
    kept = network.kept_hierarchy()
    return _with_parameters(m, inferred_hierarchy=kept)


#: The network :func:`probe_with_cache` built on the root for the measurement
#: it returned, by the measurement's ``id`` while it lives: :func:`network_of`
#: hands it out instead of building it again.
_BUILT: dict[int, tuple[weakref.ref[Measurement], Any]] = {}


def _forget(key: int) -> Callable[[Any], None]:
    """The weakref callback that drops the network of the measurement ``key`` with it."""

    def drop(_ref: Any) -> None:
        _BUILT.pop(key, None)

    return drop


def network_of(measurement: Measurement) -> Any:
    """The :class:`~rankopt.network.core.Network` of ``measurement``, built once.

    At a cold start the root of :func:`probe_with_cache` builds the network
    of the measurement it returns, to keep its inferred hierarchy with the
    stored entry; for that very measurement object this returns that
    network. For any other measurement (every rank but the root, a hit, a
    probe without the cache) it is ``Network.from_measurement(measurement)``.
    The entry points call this instead of building the network themselves,
    so a cold start infers the hierarchy once.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.measurement import Measurement
    >>> m = Measurement(np.full((2, 2), 1e-5) * (1 - np.eye(2)), None, ("a", "b"))
    >>> network_of(m).n
    2
    """
    entry = _BUILT.get(id(measurement))
    if entry is not None and entry[0]() is measurement:
        return entry[1]
    from rankopt.network.core import Network

    return Network.from_measurement(measurement)


def _with_parameters(m: Measurement, **entries: Any) -> Measurement:
    """``m`` with ``entries`` added to its parameters; the read-only arrays are shared, not
    copied (``dataclasses.replace`` would copy and check every n x n matrix again)."""
    out = copy.copy(m)
    object.__setattr__(out, "parameters", dict(m.parameters) | entries)
    return out


def _with_cache_info(m: Measurement, info: Mapping[str, Any]) -> Measurement:
    return _with_parameters(m, cache=dict(info))


def _log(m: Measurement) -> None:
    logger.info("rankopt: %s", describe_cache(m.parameters.get("cache")))


#: Environment variables that change which algorithm an engine runs (and so the order).
_ENGINE_ENV = ("OMPI_MCA_", "MPICH_", "MPIR_CVAR_", "NCCL_", "I_MPI_", "RANKOPT_")
#: Format of a kept solve; raised when the models or the rules behind a solve change
#: (2: Gloo's ring priced the way it sends, to rank - 1), so that a result kept by an
#: earlier rankopt is solved again rather than reused. Part of the key.
SOLVED_FORMAT = "rankopt.solved/2"


def _solved_path(
    cache: ProbeCache, network: Any, what: Mapping[str, Any]
) -> tuple[Path, str] | None:
    import hashlib

    from rankopt.network.core import network_digest

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENGINE_ENV))
    try:
        text = repr((SOLVED_FORMAT, network_digest(network), sorted(what.items()), env))
    except TypeError:  # options that do not sort: no memo
        return None
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    return Path(str(cache.directory)) / f"solved-{key}.json", key


def reuse_solved(
    cache_option: Any, measurement: Measurement, network: Any, what: Mapping[str, Any]
) -> Any:
    """The result solved before on this very network with these options, or None.

    Only after a cache hit (``measurement.parameters["cache"]["status"] ==
    "hit"``): the network is then the stored one, number for number, and the
    same options (``what``: collective, algorithm and every solve option) and
    the same engine variables of the environment give the same order, so the
    solve is skipped. A note on the result says so.
    """
    info = measurement.parameters.get("cache") or {}
    cache = resolve_cache(cache_option)
    if cache is None or info.get("status") != "hit":
        return None
    found = _solved_path(cache, network, what)
    if found is None or not found[0].is_file():
        return None
    from rankopt._files import MAX_TEXT_BYTES, open_regular
    from rankopt.solvers.result import SolveResult

    try:
        with open_regular(found[0], what="kept solve", max_bytes=MAX_TEXT_BYTES) as fh:
            doc = json.loads(fh.read())
        if doc.get("key") != found[1] or doc.get("format") != SOLVED_FORMAT:
            return None
        res = SolveResult.from_dict(doc["result"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.info("rankopt: kept solve %s unusable (%s); solving again", found[0], exc)
        return None
    note = "solve: the order solved before on this probe, same options: reused"
    return replace(res, notes=(*res.notes, note))


def keep_solved(
    cache_option: Any, measurement: Measurement, network: Any, what: Mapping[str, Any], res: Any
) -> None:
    """Keep ``res`` for :func:`reuse_solved` (the root, after a solve with the cache on).

    A failure to write is logged, never raised: the memo only saves time.
    """
    cache = resolve_cache(cache_option)
    if cache is None or not measurement.parameters.get("cache"):
        return
    found = _solved_path(cache, network, what)
    if found is None:
        return
    from rankopt._files import atomic_write_text

    try:
        doc = {"format": SOLVED_FORMAT, "key": found[1], "result": res.to_dict()}
        atomic_write_text(found[0], json.dumps(doc) + "\n", what="kept solve")
        now = time.time()
        for old in found[0].parent.glob("solved-*.json"):  # the memo stays small
            if now - old.stat().st_mtime > cache.max_age:
                old.unlink(missing_ok=True)
    except (OSError, ValueError, TypeError) as exc:
        logger.info("rankopt: could not keep the solve (%s)", exc)


def solved_once(
    cache_option: Any,
    measurement: Measurement,
    network: Any,
    what: Mapping[str, Any],
    run: Callable[[], Any],
) -> Any:
    """The kept result of this probe and options (:func:`reuse_solved`), else ``run()``, kept.

    What every entry point's root calls in place of ``solve``: ``run`` is
    the solve itself, ``what`` every option that shapes it.
    """
    res = reuse_solved(cache_option, measurement, network, what)
    if res is None:
        res = run()
        keep_solved(cache_option, measurement, network, what, res)
    return res


def describe_cache(info: Mapping[str, Any] | None) -> str:
    """One line on what the cache did, for the entry points' reports.

    Examples
    --------
    >>> describe_cache({"status": "hit", "age_s": 125.0, "check_s": 0.31, "pairs": [1, 2]})
    'probe: cached (2 min old), 2 pairs checked in 0.31 s, none moved'
    >>> describe_cache({"status": "hit", "age_s": 30, "check_s": 0.4, "pairs": [1, 2, 3],
    ...                 "second_look": 1})
    'probe: cached (30 s old), 3 pairs checked in 0.40 s, none moved (1 on a second look)'
    >>> describe_cache({"status": "probed", "reason": "no entry for these hosts"})
    'probe: measured (no entry for these hosts); stored for the next launch'
    >>> describe_cache(None)
    'probe: measured (cache off)'
    """
    if not info:
        return "probe: measured (cache off)"
    if info.get("status") == "hit":
        age = float(info.get("age_s", 0.0))
        when = f"{age / 60:.0f} min" if age >= 60 else f"{age:.0f} s"
        again = int(info.get("second_look", 0))
        return (
            f"probe: cached ({when} old), {len(info.get('pairs', []))} pairs checked in "
            f"{float(info.get('check_s', 0.0)):.2f} s, none moved"
            + (f" ({again} on a second look)" if again else "")
        )
    return f"probe: measured ({info.get('reason', '?')}); stored for the next launch"
