"""Incremental swap deltas under shared uplinks (``objective="contention"``).

``make_step_contention`` builds the ``StepContention`` kernel
(``src_ext/_step_contention.pyx``) of a schedule: per step, per (level,
group, direction) the number of transfers on the uplink and their largest
latencies, so that a swap, which changes only the transfers of two ranks,
costs ``O(levels log G)`` per step it touches instead of a recount of every
transfer of the step. It applies when each step's transfers carry one size
(all built-in schedules but the chain's last segment and the hierarchical
one), its tables fit in memory and uplinks split evenly (``straggle`` 1:
with a measured exponent a transfer's share depends on the counts at both
its ends, :attr:`rankopt.models.network.NetworkArrays.straggle`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rankopt._build_check import require_extension
from rankopt.models.network import NetworkArrays
from rankopt.models.schedule import Schedule

_sc = require_extension("rankopt.models._step_contention")

__all__ = ["make_step_contention"]

#: Largest size (bytes) of the kernel's per-slot tables.
MAX_TABLE_BYTES = 1 << 27


def _csr(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, int]:
    counts = np.bincount(key, minlength=size)
    ptr = np.zeros(size + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    return ptr, np.argsort(key, kind="stable").astype(np.int64), int(counts.max(initial=0))


def _merge_alike(
    ptr: np.ndarray, src: np.ndarray, dst: np.ndarray, frac: np.ndarray, rep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The steps with the same transfers (same pairs, same sizes) stored once, their
    repeat counts summed, in the order of their first occurrence.

    A step's time under shared uplinks depends only on its set of transfers, and
    the cost is the sum of the step times: recursive halving's reduce-scatter and
    the doubling allgather that replays it (Rabenseifner) are the same steps, so a
    swap's delta visits half of them.
    """
    nsteps = len(rep)
    if nsteps < 2:
        return ptr, src, dst, frac, rep
    first: dict[bytes, int] = {}
    keep: list[int] = []
    total = rep.astype(np.float64).copy()
    for s in range(nsteps):
        a, b = int(ptr[s]), int(ptr[s + 1])
        idx = np.lexsort((dst[a:b], src[a:b])) + a
        key = (
            np.ascontiguousarray(src[idx]).tobytes()
            + np.ascontiguousarray(dst[idx]).tobytes()
            + np.ascontiguousarray(frac[idx], dtype=np.float64).tobytes()
        )
        k = first.setdefault(key, s)
        if k == s:
            keep.append(s)
        else:
            total[k] += total[s]
    if len(keep) == nsteps:
        return ptr, src, dst, frac, rep
    parts = [np.arange(ptr[s], ptr[s + 1], dtype=np.int64) for s in keep]
    idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    new_ptr = np.zeros(len(keep) + 1, dtype=np.int64)
    new_ptr[1:] = np.cumsum([len(p) for p in parts])
    return new_ptr, src[idx], dst[idx], frac[idx], total[keep]


def make_step_contention(
    sched: Schedule, net: NetworkArrays, full: Any, *, alike: bool = False, per_end: bool = False
) -> Any:
    """The ``StepContention`` kernel of ``sched`` on ``net``, or ``None`` where it does not apply.

    ``alike``: every step has the same transfers (a ring): they are stored
    once with the total repeat count. ``full`` evaluates full costs.
    ``per_end``: with a sharing exponent, price every shared uplink at
    ``K**straggle`` from its own count (the proxy of
    :attr:`~rankopt.models.base.Capabilities.proxy_search`, with ``full``
    built alike); without it the kernel applies only to an even split.
    """
    if not (net.levels and net.has_rate) or (net.straggle != 1.0 and not per_end):
        # with straggle a transfer's share depends on the counts at both its
        # ends, which no slot of one group and direction holds: the step
        # evaluator recounts the steps a swap touches instead
        return None
    ptr, frac, rep = sched.step_ptr, sched.frac, sched.repeat.astype(np.float64)
    src, dst = sched.src, sched.dst
    if alike:
        ptr, rep = ptr[:2], np.array([rep.sum()])
    else:
        ptr, src, dst, frac, rep = _merge_alike(ptr, src, dst, frac, rep)
    nsteps = len(rep)
    ne = int(ptr[-1])
    src, dst = src[:ne], dst[:ne]
    tstep = np.repeat(np.arange(nsteps, dtype=np.int64), np.diff(ptr))
    first = frac[ptr[:-1].clip(max=max(ne - 1, 0))] if ne else np.zeros(nsteps)
    if ne and not np.all(frac[:ne] == first[tstep]):
        return None  # a step with transfers of different sizes
    n, levels = sched.n, net.levels
    gcount = net.uplink.shape[1]
    nslots = levels * 2 * (1 << max(gcount - 1, 0).bit_length()) + 1
    if nsteps * nslots * (8 * 16 + 56) > MAX_TABLE_BYTES:  # top lists, counts, tree
        return None
    gptr = np.zeros((levels, gcount + 1), dtype=np.int64)
    gmem = np.zeros(levels * n, dtype=np.int64)
    for lev in range(levels):
        gptr[lev, 1:] = np.cumsum(np.bincount(net.labels[lev], minlength=gcount))
        gmem[lev * n : (lev + 1) * n] = np.argsort(net.labels[lev], kind="stable")
    sptr, sidx, smax = _csr(tstep * n + src, nsteps * n)
    rptr, ridx, rmax = _csr(tstep * n + dst, nsteps * n)
    # rank-major: every rank's transfers (as sender or receiver) by step
    ranks = np.concatenate([src, dst])
    ids = np.concatenate([np.arange(ne), np.arange(ne)]).astype(np.int64)
    key = np.lexsort((ids, tstep[ids], ranks))
    kptr = np.zeros(n + 1, dtype=np.int64)
    kptr[1:] = np.cumsum(np.bincount(ranks, minlength=n))
    bw = net.bandwidth if net.bandwidth is not None else np.zeros((1, 1))
    c = np.ascontiguousarray(first * float(net.nbytes))  # type: ignore[arg-type,operator]
    return _sc.StepContention(
        full,
        net.latency,
        bw,
        net.bandwidth is not None,
        net.labels,
        *net.capacities(),
        net.shares(int(np.diff(ptr).max(initial=0))),
        net.tenant,
        net.tenant_in,
        gptr,
        gmem,
        np.ascontiguousarray(src),
        np.ascontiguousarray(dst),
        np.ascontiguousarray(ptr),
        c,
        np.ascontiguousarray(rep),
        sptr,
        sidx,
        rptr,
        ridx,
        kptr,
        np.ascontiguousarray(np.stack([tstep[ids], ids, src[ids], dst[ids]], axis=1)[key]),
        max(2 * (smax + rmax), 1),
    )
