"""What a cache hit costs at scale: the root's own work and what the other ranks receive.

No machine here has 1,024 or 4,096 processes, so the root's side of a hit
(:func:`rankopt.adapters.cache.probe_with_cache` on rank 0) is timed step by
step on a kept probe of that size: read the entry and put it in this
launch's ranks, build the network, plan the drift check (its pairs and
slots), judge the sampled pairs (here: the stored values, so the entry
holds), and look up the order solved before on it. The drift check's own
transfers (a dozen pairs, about 15 ms each) and the exchange of the order
are left out. The kept probe is a cloud-like hierarchy (4 processes a host,
8 hosts a rack, 2 zones) with noisy latency, stored as a first launch stores
it (hierarchy kept). Also printed: the bytes every other rank receives on a
hit, for an entry point (the order only) and for a caller of the public
``measure()`` (the whole probe, six ``n x n`` matrices).

    python bench/bench_cache_hit.py
    python bench/bench_cache_hit.py --sizes 1024,2048,4096 --repeats 3
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def kept_probe(n: int, seed: int = 0):
    """A probe's measurement of ``n`` processes on a two-zone cloud, as a first launch keeps it."""
    from rankopt.adapters import cache as C
    from rankopt.network.core import Network
    from rankopt.probe.measurement import Measurement

    rng = np.random.default_rng(seed)
    host = np.arange(n) // 4
    rack = host // 8
    zone = rack * 2 // max(int(rack.max()) + 1, 1)
    same_h, same_r = host[:, None] == host, rack[:, None] == rack
    same_z = zone[:, None] == zone
    lat = np.select([same_h, same_r, same_z], [2e-6, 20e-6, 60e-6], 600e-6)
    lat = lat * rng.lognormal(0.0, 0.1, (n, n))
    lat = (lat + lat.T) / 2
    bw = np.select([same_h, same_r, same_z], [20e9, 3e9, 1.5e9], 0.6e9)
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, 0.0)
    counts = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    m = Measurement(
        lat,
        bw,
        tuple(f"vm{h}" for h in host),
        latency_spread=0.05 * lat,
        bandwidth_spread=0.02 * bw,
        pair_counts=counts,
        bandwidth_counts=counts,
        started_at=time.time() - 60,
        finished_at=time.time(),
        backend="mpi",
    )
    return C._with_hierarchy_kept(m, Network.from_measurement(m))


class _Root:
    """The probe as its root sees it, alone: the collectives return what the root gives."""

    me = 0

    def __init__(self, hosts: tuple[str, ...]) -> None:
        self.hosts = hosts

    def _start(self) -> tuple[tuple[str, ...], float]:
        return self.hosts, time.time()

    def _allreduce_max(self, values: np.ndarray, phase: str) -> np.ndarray:
        return values


def hit_steps(n: int, tmp: Path) -> dict[str, float]:
    """Seconds of the root's side of a hit on a kept probe of ``n`` processes.

    ``probe_with_cache`` itself, with the root alone (the other ranks' part of
    the collectives and the drift-check transfers answered from the stored
    values), then what the entry point does next: its network and the key of
    the order solved before. The steps inside are timed apart too.
    """
    from unittest import mock

    from rankopt.adapters import cache as C
    from rankopt.adapters.drift import pair_uses
    from rankopt.network.core import Network
    from rankopt.probe import _engine
    from rankopt.probe._common import ProbeParams

    m = kept_probe(n)
    cache = C.ProbeCache(tmp)
    key = C.cache_key("mpi", m.hosts, ProbeParams())
    m.save(cache.path(key))
    now = m.hosts[::-1]  # this launch numbers the processes the other way round
    what = {"collective": "allreduce", "algorithm": None, "engine": "openmpi"}
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    stored, reason = C._lookup(cache, key, now, "mpi")
    assert stored is not None, reason
    t["read"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    net = Network.from_measurement(stored)
    t["network"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    uses = pair_uses(net)
    C.check_slots(C._check_plan(net, uses), net, uses=uses)
    t["plan"] = time.perf_counter() - t0

    def answer(probe, plan, slots=None):  # the sampled pairs read as stored: the entry holds
        lat = np.array([stored.latency[i, j] for i, j, _ in plan])
        return lat, np.array([stored.bandwidth[i, j] for i, j, _ in plan])

    with (
        mock.patch.object(_engine, "_Probe", lambda *a: _Root(now)),
        mock.patch.object(C, "_sample", answer),
    ):
        t0 = time.perf_counter()
        root = {"root": 0} if "root" in inspect.signature(C.probe_with_cache).parameters else {}
        hit = C.probe_with_cache(None, ProbeParams(), cache, None, backend="mpi",
                                 hostname="h", **root)  # fmt: skip
        t["probe_with_cache"] = time.perf_counter() - t0
    assert hit is not None and hit.parameters["cache"]["status"] == "hit"
    t0 = time.perf_counter()
    C._solved_path(cache, C.network_of(hit), what)  # no kept solve here: a miss
    t["caller"] = time.perf_counter() - t0
    t["total"] = t["probe_with_cache"] + t["caller"]
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1024,4096", help="processes (comma list)")
    p.add_argument("--repeats", type=int, default=3, help="runs per size (median)")
    args = p.parse_args()
    steps = ("read", "network", "plan", "probe_with_cache", "caller", "total")
    print("| n | " + " | ".join(f"{s} s" for s in steps) + " | other ranks get (entry point) "
          "| other ranks get (`measure()`) |")  # fmt: skip
    print("|---" * (len(steps) + 3) + "|")
    for n in (int(s) for s in args.sizes.split(",")):
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="rankopt-hit-") as tmp:
                runs.append(hit_steps(n, Path(tmp)))
        med = {s: statistics.median(r[s] for r in runs) for s in steps}
        whole = f"{6 * n * n * 8 / 1e6:.0f} MB"
        from rankopt.adapters.cache import probe_with_cache

        root = "root" in inspect.signature(probe_with_cache).parameters
        print(f"| {n} | " + " | ".join(f"{med[s]:.2f}" for s in steps)
              + f" | {f'{8 * n} B (the order)' if root else whole} | {whole} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
