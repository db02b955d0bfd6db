"""131,072 ranks on 16,384 hosts: the ring on a HierarchicalNetwork (not part of the smoke run).

    python bench/large_hier.py            # ~25 s with the data, ~3.3 GB peak memory

A synthetic three-level cloud given per host (8 pods x 32 racks x 64 hosts, 8
ranks per host, ranks launched in a random order): float32 host-level latency
and bandwidth matrices with tiers per level and log-normal noise (symmetric),
and uplinks per host, rack and pod. Solves the ring ``sum`` and the
``contention`` model (16 MiB allreduce), and prints for each the wall time,
the modelled speedup over the launch order, and the quality against the
hierarchy-contiguous order (its cost over ours: >= 1 is as good or better);
then the peak RSS of the process (``resource.getrusage``), data included.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import rankopt
from rankopt.network.hierarchical import HierarchicalNetwork

#: Latency (s) and bandwidth (B/s) of a host pair by the level they meet at.
LATENCY_TIERS = (8e-6, 15e-6, 30e-6)
BANDWIDTH_TIERS = (12.5e9, 10e9, 6.25e9)
#: Uplink capacity (B/s) of a host, a rack and a pod.
UPLINKS = (12.5e9, 25e9, 50e9)


def synthetic_hierarchical(
    pods: int = 8,
    racks: int = 32,
    hosts: int = 64,
    per_host: int = 8,
    sigma: float = 0.15,
    seed: int = 0,
) -> HierarchicalNetwork:
    """A noisy three-level cloud given per host (float32 host matrices, built in blocks)."""
    rng = np.random.default_rng(seed)
    h = pods * racks * hosts
    rack = np.arange(h) // hosts
    pod = rack // racks
    lat = np.empty((h, h), dtype=np.float32)
    bw = np.empty((h, h), dtype=np.float32)
    b = 1024
    for i in range(0, h, b):
        for j in range(i, h, b):
            ri, rj = slice(i, i + b), slice(j, j + b)
            meet = np.where(
                rack[ri, None] == rack[None, rj], 0, np.where(pod[ri, None] == pod[None, rj], 1, 2)
            )
            noise = rng.lognormal(0.0, sigma, meet.shape)
            lat[ri, rj] = np.asarray(LATENCY_TIERS)[meet] * noise
            bw[ri, rj] = np.asarray(BANDWIDTH_TIERS)[meet] / noise
            if j != i:
                lat[rj, ri] = lat[ri, rj].T
                bw[rj, ri] = bw[ri, rj].T
            else:
                up = np.triu(np.ones(meet.shape, dtype=bool), 1)
                lat[ri, rj] = np.where(up, lat[ri, rj], lat[ri, rj].T)
                bw[ri, rj] = np.where(up, bw[ri, rj], bw[ri, rj].T)
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, 0.0)
    host_of = rng.permutation(np.repeat(np.arange(h), per_host))
    return HierarchicalNetwork(
        host_of,
        lat,
        bw,
        groups=[rack, pod],
        uplinks=list(UPLINKS),
        intra_latency=1e-6,
        intra_bandwidth=50e9,
        source="synthetic",
    )


def peak_rss_gb() -> float:
    """Peak resident set size of this process so far (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=8)
    ap.add_argument("--racks", type=int, default=32, help="racks per pod")
    ap.add_argument("--hosts", type=int, default=64, help="hosts per rack")
    ap.add_argument("--per-host", type=int, default=8, help="ranks per host")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t = time.perf_counter()
    net = synthetic_hierarchical(args.pods, args.racks, args.hosts, args.per_host, seed=args.seed)
    print(f"{net!r}: built in {time.perf_counter() - t:.1f} s, peak RSS {peak_rss_gb():.2f} GB")
    for objective in ("sum", "contention"):
        t = time.perf_counter()
        r = rankopt.solve(net, objective=objective, rng=0)
        wall = time.perf_counter() - t
        info = r.extra["hierarchical"]
        print(
            f"n={net.n} hosts={net.n_hosts} {objective}: {wall:.1f} s wall "
            f"(host ring {info['host_solve_s']:.1f} s, {r.method}), cost {r.cost:.6g} s, "
            f"{r.speedup:.2f}x over launch order, quality vs hierarchy-contiguous "
            f"{info['quality_vs_contiguous']:.4f} (contiguous {info['contiguous_cost']:.6g} s), "
            f"kept {info['kept']}, peak RSS {peak_rss_gb():.2f} GB"
        )


if __name__ == "__main__":
    main()
