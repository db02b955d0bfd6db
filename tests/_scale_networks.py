"""Hierarchical networks of uneven groups for the scale tests and ``bench/bench_solve_scale.py``.

``uneven_network`` builds a :class:`rankopt.Network` of hosts in racks (two
levels) or in racks in pods (three levels) whose group sizes are drawn at
random, with latency and bandwidth tiers by the level two processes share,
log-normal noise, a few congested hosts, every group's uplink capacity (some
loaded by another tenant), and the launch order shuffled.
"""

from __future__ import annotations

import numpy as np

import rankopt

#: One-way latency (s) and bandwidth (B/s) by shared level: host, rack, pod, none.
LATENCY = (4e-6, 20e-6, 50e-6, 150e-6)
BANDWIDTH = (40e9, 3.125e9, 1.25e9, 0.625e9)
#: Uplink capacity (B/s) of a host, a rack and a pod.
UPLINK = (3.125e9, 12.5e9, 25e9)


def uneven_network(
    n: int,
    *,
    levels: int = 3,
    per_host: int = 1,
    rack_hosts: tuple[int, int] = (5, 24),
    pod_racks: tuple[int, int] = (2, 6),
    seed: int = 0,
) -> rankopt.Network:
    """``n`` processes, ``per_host`` per host, racks of ``rack_hosts`` hosts (drawn), shuffled.

    ``levels=3`` groups racks into pods of ``pod_racks`` racks; ``levels=2``
    has hosts and racks only. Group sizes are uneven (the last group takes
    what is left). A fifth of the racks and pods have their uplink loaded
    (a third to two thirds of it left).
    """
    gen = np.random.default_rng(seed)
    n_hosts = -(-n // per_host)
    host = np.arange(n) // per_host
    rack_of_host = np.empty(n_hosts, dtype=np.int64)
    h, r = 0, 0
    while h < n_hosts:
        size = int(gen.integers(rack_hosts[0], rack_hosts[1] + 1))
        rack_of_host[h : h + size] = r
        h += size
        r += 1
    n_racks = r
    pod_of_rack = np.empty(n_racks, dtype=np.int64)
    k, p = 0, 0
    while k < n_racks:
        size = int(gen.integers(pod_racks[0], pod_racks[1] + 1)) if levels == 3 else n_racks
        pod_of_rack[k : k + size] = p
        k += size
        p += 1
    rack = rack_of_host[host]
    pod = pod_of_rack[rack]
    level = np.where(
        host[:, None] == host[None, :],
        0,
        np.where(rack[:, None] == rack[None, :], 1, np.where(pod[:, None] == pod[None, :], 2, 3)),
    )
    sym = gen.lognormal(0.0, 0.1, size=(n, n))
    sym = np.triu(sym) + np.triu(sym, 1).T
    slow = (gen.random(n_hosts) < 0.04)[host]
    factor = np.where(slow[:, None] | slow[None, :], 2.5, 1.0)
    factor[level == 0] = 1.0
    lat = np.asarray(LATENCY)[level] * sym * factor
    bw = np.asarray(BANDWIDTH)[level] / sym / factor
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, 0.0)
    labels = [host, rack] + ([pod] if levels == 3 else [])
    ups = []
    for lv, lab in enumerate(labels):
        g = int(lab.max()) + 1
        u = np.full(g, UPLINK[lv])
        if lv:
            loaded = gen.random(g) < 0.2
            u[loaded] *= gen.uniform(1 / 3, 2 / 3, size=int(loaded.sum()))
        ups.append(u)
    perm = gen.permutation(n)
    if per_host == 1:  # a host of one process shares no uplink with another: no level
        labels, ups = labels[1:], ups[1:]
    return rankopt.Network(
        latency=lat[np.ix_(perm, perm)],
        bandwidth=bw[np.ix_(perm, perm)],
        groups=[lab[perm] for lab in labels],
        uplinks=ups,
        source="synthetic-uneven",
    )
