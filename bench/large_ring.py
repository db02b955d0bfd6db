"""Ring ``sum`` at n = 16384 from a float32 matrix (not part of the smoke run).

    python bench/large_ring.py            # ~16 s, ~1.4 GB peak memory

The matrix is a three-level cloud of points (4 pods x 16 racks x 256 hosts),
shuffled; rankopt validates it in place (no copy: the ring kernels read float32)
and solves.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rankopt


def cloud_float32(n_pods: int = 4, racks: int = 16, hosts: int = 256, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pod = rng.normal(size=(n_pods, 2)) * 100
    rack = pod[:, None, :] + rng.normal(size=(n_pods, racks, 2)) * 10
    host = rack[:, :, None, :] + rng.normal(size=(n_pods, racks, hosts, 2))
    n = n_pods * racks * hosts
    pts = host.reshape(-1, 2)[rng.permutation(n)].astype(np.float32)
    lat = np.empty((n, n), dtype=np.float32)
    for i in range(0, n, 1024):
        d = pts[i : i + 1024, None, :] - pts[None, :, :]
        lat[i : i + 1024] = np.sqrt((d * d).sum(-1)) * np.float32(1e-6)
    return lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256, help="hosts per rack (n = 64 * hosts)")
    args = ap.parse_args()
    lat = cloud_float32(hosts=args.hosts)
    for method in ("two_opt", "auto"):
        t = time.perf_counter()
        r = rankopt.solve(lat, method=method, rng=0)
        print(
            f"n={lat.shape[0]} {method} ({r.method}): cost {r.cost:.6g} s, "
            f"{r.speedup:.1f}x over launch order, {time.perf_counter() - t:.1f} s wall"
        )


if __name__ == "__main__":
    main()
