"""Step generators of every collective algorithm (internal to ``schedule()``).

Each generator returns a list of :class:`Step` in new-rank numbers. A step's
transfers run concurrently; ``frac`` is the payload as a fraction of
``nbytes`` (see :func:`rankopt.models.schedule.schedule` for what ``nbytes``
means per collective). With ``blocks=True`` every transfer also carries the
ids of the data blocks it moves, so that tests can execute a schedule
symbolically; ``reduce`` says whether the receiver combines (``True``) or
stores (``False``) what it gets.

Conventions shared with MPICH / NCCL (cited per generator): roots are new
rank 0; non-powers of two are folded (MPICH): ranks ``2i`` (``i < r``,
``r = n - 2**floor(lg n)``) hand their data to ``2i + 1`` first and get the
result back at the end.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError

__all__ = [
    "Step", "Layout", "Algorithm", "register_algorithm", "algorithm_spec", "ALGORITHM_SPECS",
    "ALGORITHMS", "COLLECTIVES", "MODEL_KINDS",
    "parallel", "btree_parents",
]  # fmt: skip

Blocks = tuple[int, ...]


@dataclass
class Step:
    """One step: concurrent transfers ``src[t] -> dst[t]`` of ``frac[t] * nbytes``."""

    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    frac: NDArray[np.float64]
    reduce: bool
    blocks: list[Blocks] | None = None
    repeat: int = 1


@dataclass(frozen=True)
class Layout:
    """Block layout: ``nblocks`` ids, each ``block_frac`` of ``nbytes`` (or one size per block)."""

    nblocks: int
    block_frac: float | tuple[float, ...]

    def size(self, block: int) -> float:
        """Size of ``block`` as a fraction of ``nbytes``."""
        f = self.block_frac
        return float(f[block]) if isinstance(f, tuple) else float(f)


def _step(src, dst, frac, reduce, blocks, with_blocks) -> Step:
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    f = np.broadcast_to(np.asarray(frac, dtype=np.float64), src.shape).copy()
    return Step(src, dst, f, reduce, list(blocks) if with_blocks else None)


def parallel(*phases: list[Step]) -> list[Step]:
    """Run step lists side by side: step k of the result joins step k of each."""
    out: list[Step] = []
    for k in range(max((len(p) for p in phases), default=0)):
        parts = [p[k] for p in phases if k < len(p)]
        red = {s.reduce for s in parts}
        if len(red) != 1:
            raise AssertionError("parallel steps must agree on reduce/copy")
        blocks = None
        if parts[0].blocks is not None:
            blocks = [b for s in parts for b in s.blocks]  # type: ignore[union-attr]
        out.append(
            Step(
                np.concatenate([s.src for s in parts]),
                np.concatenate([s.dst for s in parts]),
                np.concatenate([s.frac for s in parts]),
                parts[0].reduce,
                blocks,
            )
        )
    return out


def _pof2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1)


# ----------------------------------------------------------------- rings
def ring_phase(
    members: NDArray[np.int64], chunks: Sequence[Blocks], frac: float, reduce: bool, wb: bool
) -> list[Step]:
    """Ring reduce-scatter (``reduce``) or allgather over ``members``.

    Member ``l`` sends chunk ``(l - t - 1) % m`` (reduce-scatter: member ``l``
    ends owning chunk ``l``) or ``(l - t) % m`` (allgather) to member ``l+1``
    at step ``t``; ``m - 1`` steps.
    """
    m = len(members)
    src = np.asarray(members, dtype=np.int64)
    dst = np.roll(src, -1)
    steps = []
    for t in range(m - 1):
        blocks = None
        if wb:
            shift = t + 1 if reduce else t
            blocks = [chunks[(l - shift) % m] for l in range(m)]
        steps.append(_step(src, dst, frac, reduce, blocks or [], wb))
    return steps


def _ring_allreduce(n, wb, **_):
    """Ring reduce-scatter then ring allgather, rank ``r`` sending to ``r + 1``.

    The step order of Open MPI's ``ompi_coll_base_allreduce_intra_ring``
    (step 0: rank r sends block r to r + 1; also what its segmented ring
    runs when the segment size is 0, as in the fixed decision) and MPICH's
    ``MPIR_Allreduce_intra_ring``; Gloo's runs the other way round
    (:func:`_ring_allreduce_gloo`).
    """
    ids = np.arange(n)
    chunks = [(c,) for c in range(n)]
    return (
        ring_phase(ids, chunks, 1 / n, True, wb) + ring_phase(ids, chunks, 1 / n, False, wb),
        Layout(n, 1 / n),
    )


def _ring_allgather(n, wb, **_):
    """Ring allgather, rank ``r`` sending to ``r + 1`` (MPICH, Open MPI, Gloo)."""
    return ring_phase(np.arange(n), [(c,) for c in range(n)], 1 / n, False, wb), Layout(n, 1 / n)


def _ring_reduce_scatter(n, wb, **_):
    """Ring reduce-scatter, rank ``r`` sending to ``r + 1`` (MPICH)."""
    return ring_phase(np.arange(n), [(c,) for c in range(n)], 1 / n, True, wb), Layout(n, 1 / n)


def _ring_allreduce_gloo(n, wb, **_):
    """Gloo's ring allreduce (``gloo/allreduce.cc``, what torch's Gloo ``allreduce``
    runs): ring reduce-scatter then ring allgather, rank ``r`` sending to ``r - 1``
    (``sendRank = rank - 1``, ``recvRank = rank + 1``), the other way round from
    Open MPI's and MPICH's. The same ring reversed: alike on symmetric links, not
    where an uplink's two directions differ (another tenant loading one way).
    """
    members = np.array([0, *range(n - 1, 0, -1)], dtype=np.int64)  # 0 -> n-1 -> ... -> 1
    chunks = [(int(r),) for r in members]
    return (
        ring_phase(members, chunks, 1 / n, True, wb)
        + ring_phase(members, chunks, 1 / n, False, wb),
        Layout(n, 1 / n),
    )


# ------------------------------------------------------- recursive schemes
def _fold(n: int) -> tuple[int, int, NDArray[np.int64]]:
    """MPICH fold: ``(p2, r, active)``; virtual rank ``v`` runs on ``active[v]``."""
    p2 = _pof2_floor(n)
    r = n - p2
    v = np.arange(p2)
    return p2, r, np.where(v < r, 2 * v + 1, v + r).astype(np.int64)


def _fold_pre(r, frac, reduce, blocks_of, wb) -> list[Step]:
    if r == 0:
        return []
    ev = 2 * np.arange(r)
    return [_step(ev, ev + 1, frac, reduce, [blocks_of(int(e)) for e in ev] if wb else [], wb)]


def _fold_post(r, frac, blocks_of, wb) -> list[Step]:
    if r == 0:
        return []
    ev = 2 * np.arange(r)
    return [_step(ev + 1, ev, frac, False, [blocks_of(int(e)) for e in ev] if wb else [], wb)]


def _halving(p2, active, vchunks, nbytes_per_block, wb) -> list[Step]:
    """Recursive-halving reduce-scatter over virtual ranks (distance p2/2 .. 1)."""
    lo = np.zeros(p2, dtype=np.int64)
    hi = np.full(p2, p2, dtype=np.int64)
    sizes = np.array([len(c) for c in vchunks], dtype=np.float64) * nbytes_per_block
    steps = []
    mask = p2 // 2
    v = np.arange(p2)
    while mask >= 1:
        half = (hi - lo) // 2
        upper = (v & mask) != 0
        s_lo = np.where(upper, lo, lo + half)
        s_hi = np.where(upper, lo + half, hi)
        frac = [sizes[a:b].sum() for a, b in zip(s_lo, s_hi, strict=False)]
        blocks = (
            [tuple(x for c in vchunks[a:b] for x in c) for a, b in zip(s_lo, s_hi, strict=False)]
            if wb
            else []
        )
        steps.append(_step(active, active[v ^ mask], frac, True, blocks, wb))
        lo, hi = np.where(upper, lo + half, lo), np.where(upper, hi, lo + half)
        mask //= 2
    return steps


def _doubling_gather(p2, active, vchunks, nbytes_per_block, wb) -> list[Step]:
    """Recursive-doubling allgather over virtual ranks (distance 1 .. p2/2)."""
    sizes = np.array([len(c) for c in vchunks], dtype=np.float64) * nbytes_per_block
    v = np.arange(p2)
    steps = []
    mask = 1
    while mask < p2:
        lo = v & ~(mask - 1)
        frac = [sizes[a : a + mask].sum() for a in lo]
        blocks = [tuple(x for c in vchunks[a : a + mask] for x in c) for a in lo] if wb else []
        steps.append(_step(active, active[v ^ mask], frac, False, blocks, wb))
        mask *= 2
    return steps


def _real_vchunks(n, p2, r) -> list[Blocks]:
    return [(2 * v, 2 * v + 1) if v < r else (v + r,) for v in range(p2)]


def _rd_allreduce(n, wb, **_):
    """Recursive doubling, distance 1 first, full vector every step.

    Open MPI's ``ompi_coll_base_allreduce_intra_recursivedoubling`` and
    MPICH's ``MPIR_Allreduce_intra_recursive_doubling`` share this order and
    the fold: even ranks ``< 2r`` send their vector to ``rank + 1``, drop
    out and get the result back at the end.
    """
    p2, r, active = _fold(n)
    allb = tuple(range(n))
    v = np.arange(p2)
    mid = []
    mask = 1
    while mask < p2:
        mid.append(_step(active, active[v ^ mask], 1.0, True, [allb] * p2 if wb else [], wb))
        mask *= 2
    steps = _fold_pre(r, 1.0, True, lambda e: allb, wb) + mid
    return steps + _fold_post(r, 1.0, lambda e: allb, wb), Layout(n, 1 / n)


def _rabenseifner(n, wb, **_):
    """Rabenseifner's allreduce in the textbook step order: distance ``p2/2`` first.

    The order of the description in Thakur, Rabenseifner & Gropp, "Optimization
    of Collective Communication Operations in MPICH" (IJHPCA 2005) and of
    MPICH's recursive-halving reduce-scatter (``_rh_reduce_scatter``):
    recursive halving (distance ``p2/2`` first, half the vector to the farthest
    partner) then recursive-doubling allgather (distance 1 first); non-powers
    of two folded as in MPICH (:func:`_fold`: even ranks ``< 2r`` hand their
    whole vector to ``rank + 1`` and drop out). MPICH's own allreduce
    (``MPIR_Allreduce_intra_reduce_scatter_allgather``, 3.x to 5.0) halves at
    distance 1 first: that is :func:`_rabenseifner_mpich`.
    """
    p2, r, active = _fold(n)
    allb = tuple(range(p2))
    vchunks = [(v,) for v in range(p2)]
    steps = _fold_pre(r, 1.0, True, lambda e: allb, wb)
    steps += _halving(p2, active, vchunks, 1 / p2, wb)
    steps += _doubling_gather(p2, active, vchunks, 1 / p2, wb)
    return steps + _fold_post(r, 1.0, lambda e: allb, wb), Layout(p2, 1 / p2)


def _ompi_halving_doubling(p2, active, wb) -> tuple[list[Step], list[Step]]:
    """Reduce-scatter by vector halving at distance 1 first, and its mirror allgather.

    Open MPI's ``ompi_coll_base_allreduce_intra_redscat_allgather`` and
    MPICH's ``MPIR_Allreduce_intra_reduce_scatter_allgather`` share it: at distance
    ``mask = 1, 2, ..., p2/2`` virtual rank ``v`` exchanges half its window
    with ``v ^ mask``; the lower rank keeps the left half. The allgather
    replays the exchanges in reverse (distance ``p2/2`` first), each rank
    sending the window it holds.
    """
    v = np.arange(p2)
    lo = np.zeros(p2, dtype=np.int64)
    hi = np.full(p2, p2, dtype=np.int64)
    rs: list[Step] = []
    windows = []
    mask = 1
    while mask < p2:
        mid = lo + (hi - lo) // 2
        lower = (v & mask) == 0
        s_lo, s_hi = np.where(lower, mid, lo), np.where(lower, hi, mid)
        blocks = [tuple(range(a, b)) for a, b in zip(s_lo, s_hi, strict=True)] if wb else []
        rs.append(_step(active, active[v ^ mask], (s_hi - s_lo) / p2, True, blocks, wb))
        lo, hi = np.where(lower, lo, mid), np.where(lower, mid, hi)
        windows.append((lo.copy(), hi.copy()))
        mask *= 2
    ag: list[Step] = []
    mask = p2 // 2
    for w_lo, w_hi in reversed(windows):
        blocks = [tuple(range(a, b)) for a, b in zip(w_lo, w_hi, strict=True)] if wb else []
        ag.append(_step(active, active[v ^ mask], (w_hi - w_lo) / p2, False, blocks, wb))
        mask //= 2
    return rs, ag


def _rabenseifner_ompi(n, wb, **_):
    """Open MPI's ``ompi_coll_base_allreduce_intra_redscat_allgather`` step order.

    Source: ``ompi/mca/coll/base/coll_base_allreduce.c`` (Open MPI 5.0.x).
    Fold for ``r = n - p2`` extra ranks: in the first ``2r`` ranks, even
    ``e`` sends the right half of its vector to ``e + 1`` while ``e + 1``
    sends the left half to ``e`` (both reduce), then ``e + 1`` returns its
    reduced right half to ``e`` and drops out (virtual rank ``v < r`` runs
    on ``2v``, the others on ``v + r``). Reduce-scatter by recursive vector
    halving with distance *doubling* (the half-vector exchange is with
    ``v ^ 1``), allgather in reverse order, and ``e`` finally sends the whole
    result to ``e + 1``.
    """
    p2 = _pof2_floor(n)
    r = n - p2
    v = np.arange(p2)
    active = np.where(v < r, 2 * v, v + r).astype(np.int64)
    allb = tuple(range(p2))
    left, right = allb[: p2 // 2], allb[p2 // 2 :]
    steps: list[Step] = []
    if r:
        ev = 2 * np.arange(r)
        steps.append(
            _step(
                np.concatenate([ev, ev + 1]),
                np.concatenate([ev + 1, ev]),
                0.5,
                True,
                [right] * r + [left] * r,
                wb,
            )
        )
        steps.append(_step(ev + 1, ev, 0.5, False, [right] * r, wb))
    rs, ag = _ompi_halving_doubling(p2, active, wb)
    steps += rs + ag
    if r:
        ev = 2 * np.arange(r)
        steps.append(_step(ev, ev + 1, 1.0, False, [allb] * r, wb))
    return steps, Layout(p2, 1 / p2)


def _rabenseifner_mpich(n, wb, **_):
    """MPICH's ``MPIR_Allreduce_intra_reduce_scatter_allgather`` step order.

    Source: ``src/mpi/coll/allreduce/allreduce_intra_reduce_scatter_allgather.c``
    (MPICH 3.x to 5.0; measured on 5.0.2 by ``bench/mpich_check.py``). MPICH's
    fold (:func:`_fold`: even ranks ``< 2r`` hand their whole vector to
    ``rank + 1`` and drop out, virtual rank ``v < r`` runs on ``2v + 1``),
    then the reduce-scatter by vector halving with ``mask = 1, 2, ...``
    (the half-vector exchange is with ``v ^ 1``; the lower rank keeps the
    left half) and the allgather that replays it in reverse
    (:func:`_ompi_halving_doubling`); the dropped ranks get the result back
    at the end. On powers of two it is ``rabenseifner_ompi``.
    """
    p2, r, active = _fold(n)
    allb = tuple(range(p2))
    halving, doubling = _ompi_halving_doubling(p2, active, wb)
    steps = _fold_pre(r, 1.0, True, lambda e: allb, wb) + halving + doubling
    return steps + _fold_post(r, 1.0, lambda e: allb, wb), Layout(p2, 1 / p2)


def _reduce_scatter_gather(n, wb, **_):
    """MPICH's ``MPIR_Reduce_intra_reduce_scatter_gather`` to rank 0.

    Its fold is the mirror of the allreduce's: odd ranks ``< 2r`` hand their
    whole vector to ``rank - 1`` and drop out (virtual rank ``v < r`` runs on
    ``2v``, so root 0 stays in). Then the reduce-scatter of
    :func:`_rabenseifner_mpich` (distance 1 first) and a binomial gather of
    the pieces to virtual rank 0 that replays it in reverse (distance
    ``p2/2`` first; at distance ``d`` the ranks ``d <= v < 2d`` send what
    they hold to ``v - d``). Measured on MPICH 5.0.2 (``bench/mpich_check.py``).
    """
    p2 = _pof2_floor(n)
    r = n - p2
    v = np.arange(p2)
    active = np.where(v < r, 2 * v, v + r).astype(np.int64)
    allb = tuple(range(p2))
    odd = 2 * np.arange(r) + 1
    steps = [_step(odd, odd - 1, 1.0, True, [allb] * r, wb)] if r else []
    halving, doubling = _ompi_halving_doubling(p2, active, wb)
    steps += halving
    mask = p2 // 2
    for st in doubling:
        keep = np.flatnonzero(((v & mask) != 0) & (v < 2 * mask))
        blocks = [st.blocks[k] for k in keep] if wb and st.blocks else []
        steps.append(_step(st.src[keep], st.dst[keep], st.frac[keep], False, blocks, wb))
        mask //= 2
    return steps, Layout(p2, 1 / p2)


def _rh_reduce_scatter(n, wb, **_):
    """Recursive-halving reduce-scatter, distance ``p2/2`` first (MPICH)."""
    p2, r, active = _fold(n)
    steps = _fold_pre(r, 1.0, True, lambda e: tuple(range(n)), wb)
    steps += _halving(p2, active, _real_vchunks(n, p2, r), 1 / n, wb)
    return steps + _fold_post(r, 1 / n, lambda e: (e,), wb), Layout(n, 1 / n)


def _pairwise_reduce_scatter(n, wb, **_):
    """MPICH's ``MPIR_Reduce_scatter_block_intra_pairwise``: step ``i`` sends to ``r + i``.

    At step ``i = 1 .. n-1`` rank ``r`` sends block ``r + i`` of its input to
    rank ``r + i`` (which reduces it) and gets its own block from ``r - i``.
    """
    r = np.arange(n)
    steps = []
    for i in range(1, n):
        dst = (r + i) % n
        steps.append(_step(r, dst, 1 / n, True, [(int(d),) for d in dst], wb))
    return steps, Layout(n, 1 / n)


def _rd_allgather(n, wb, **_):
    """Recursive-doubling allgather, distance 1 first (MPICH; MPICH fold)."""
    p2, r, active = _fold(n)
    steps = _fold_pre(r, 1 / n, False, lambda e: (e,), wb)
    steps += _doubling_gather(p2, active, _real_vchunks(n, p2, r), 1 / n, wb)
    rest = lambda e: tuple(b for b in range(n) if b != e)  # noqa: E731
    return steps + _fold_post(r, (n - 1) / n, rest, wb), Layout(n, 1 / n)


def _bruck(n, wb, **_):
    """Bruck allgather, distance 1 first, sending to ``r - d`` (MPICH's order)."""
    r = np.arange(n)
    steps = []
    d = 1
    while d < n:
        cnt = min(d, n - d)
        blocks = [tuple((x + k) % n for k in range(cnt)) for x in range(n)] if wb else []
        steps.append(_step(r, (r - d) % n, cnt / n, False, blocks, wb))
        d *= 2
    return steps, Layout(n, 1 / n)


def _pairwise(n, wb, **_):
    """Pairwise exchange: ``r ^ i`` on powers of two, else ``r + i`` (MPICH, Open MPI)."""
    r = np.arange(n)
    pof2 = n & (n - 1) == 0
    steps = []
    for i in range(1, n):
        dst = r ^ i if pof2 else (r + i) % n
        blocks = [(x * n + int(dst[x]),) for x in range(n)] if wb else []
        steps.append(_step(r, dst, 1 / n, False, blocks, wb))
    return steps, Layout(n * n, 1 / n)


def _linear_alltoall(n, wb, **_):
    """Every block at once: one step of all ``n (n - 1)`` transfers (Open MPI's
    ``basic_linear``/``linear_sync``, MPICH's ``scattered``), each posted to
    ``r + 1, r + 2, ...`` in turn, all in flight together."""
    r = np.arange(n)
    src = np.repeat(r, n - 1)
    dst = (src + np.tile(np.arange(1, n), n)) % n
    blocks = [(int(a) * n + int(b),) for a, b in zip(src, dst, strict=True)] if wb else []
    return [_step(src, dst, 1 / n, False, blocks, wb)], Layout(n * n, 1 / n)


# ------------------------------------------------------------------ trees
def binomial_bcast(members: NDArray[np.int64], frac: float, blocks: Blocks, wb: bool) -> list[Step]:
    """MPICH binomial broadcast from ``members[0]``: largest distance first."""
    m = len(members)
    big = 1 << max(m - 1, 0).bit_length()
    steps = []
    mask = big // 2
    while mask >= 1:
        s = np.arange(0, m, 2 * mask)
        s = s[s + mask < m]
        if len(s):
            steps.append(_step(members[s], members[s + mask], frac, False, [blocks] * len(s), wb))
        mask //= 2
    return steps


def binomial_bcast_doubling(
    members: NDArray[np.int64], frac: float, blocks: Blocks, wb: bool
) -> list[Step]:
    """Binomial broadcast from ``members[0]``, distance 1 first (Gloo's ``gloo/broadcast.cc``).

    Step ``i``: every member ``v < 2**i`` sends to ``v + 2**i``. The tree is
    the one Gloo builds (the children of ``v`` are ``v + 2**i`` above its top
    bit); Gloo posts a rank's sends at once after its receive, which the
    steps put one distance after another.
    """
    m = len(members)
    steps = []
    d = 1
    while d < m:
        s = np.arange(0, min(d, m - d))
        steps.append(_step(members[s], members[s + d], frac, False, [blocks] * len(s), wb))
        d *= 2
    return steps


def binomial_reduce(
    members: NDArray[np.int64], frac: float, blocks: Blocks, wb: bool
) -> list[Step]:
    """MPICH binomial reduce to ``members[0]``: distance 1 first."""
    m = len(members)
    steps = []
    mask = 1
    while mask < m:
        s = np.arange(mask, m, 2 * mask)
        steps.append(_step(members[s], members[s - mask], frac, True, [blocks] * len(s), wb))
        mask *= 2
    return steps


def _scatter_allgather_bcast(n, wb, doubling):
    """MPICH's scatter + allgather broadcast from rank 0 (``n`` blocks of ``1/n``).

    The scatter is ``MPII_Scatter_for_bcast``: the binomial tree of
    :func:`binomial_bcast` (largest distance first), each rank receiving
    only the blocks of its subtree (``s + d`` gets blocks ``s + d .. s +
    2d - 1``). The allgather is a ring (rank ``r`` sends to ``r + 1``, its
    own block first) or, with ``doubling`` and ``n`` a power of two,
    recursive doubling (distance 1 first).
    """
    big = 1 << max(n - 1, 0).bit_length()
    steps = []
    mask = big // 2
    while mask >= 1:
        s = np.arange(0, n, 2 * mask)
        s = s[s + mask < n]
        if len(s):
            hi = np.minimum(s + 2 * mask, n)
            blocks = [tuple(range(int(a) + mask, int(b))) for a, b in zip(s, hi, strict=True)]
            steps.append(_step(s, s + mask, (hi - s - mask) / n, False, blocks, wb))
        mask //= 2
    ids = np.arange(n)
    chunks = [(c,) for c in range(n)]
    if doubling and n & (n - 1) == 0:
        steps += _doubling_gather(n, ids, chunks, 1 / n, wb)
    else:
        steps += ring_phase(ids, chunks, 1 / n, False, wb)
    return steps, Layout(n, 1 / n)


def _scatter_ring_bcast(n, wb, **_):
    """MPICH's ``MPIR_Bcast_intra_scatter_ring_allgather`` (binomial scatter, ring allgather)."""
    return _scatter_allgather_bcast(n, wb, doubling=False)


def _scatter_rd_bcast(n, wb, **_):
    """MPICH's ``MPIR_Bcast_intra_scatter_recursive_doubling_allgather``.

    Binomial scatter, recursive-doubling allgather, on powers of two (where
    MPICH's selection uses it). Elsewhere MPICH completes the doubling with a
    tree exchange of the missing blocks; this schedule uses the ring
    allgather there (an approximation: the same volume, other partners).
    """
    return _scatter_allgather_bcast(n, wb, doubling=True)


def _binomial_allreduce(n, wb, **_):
    """Binomial reduce to rank 0 then binomial broadcast (MPICH trees).

    Also the model of Open MPI's "nonoverlapping" (reduce then bcast) and
    "basic_linear" allreduce, whose trees differ (an approximation).
    """
    r = np.arange(n)
    return binomial_reduce(r, 1.0, (0,), wb) + binomial_bcast(r, 1.0, (0,), wb), Layout(1, 1.0)


def _binomial_bcast(n, wb, **_):
    """MPICH binomial broadcast (largest distance first)."""
    return binomial_bcast(np.arange(n), 1.0, (0,), wb), Layout(1, 1.0)


def _binomial_reduce(n, wb, **_):
    """MPICH binomial reduce (distance 1 first)."""
    return binomial_reduce(np.arange(n), 1.0, (0,), wb), Layout(1, 1.0)


def _binomial_gloo_bcast(n, wb, **_):
    """Gloo's binomial broadcast (``gloo/broadcast.cc``, what torch's Gloo
    ``broadcast`` runs): distance 1 first (:func:`binomial_bcast_doubling`)."""
    return binomial_bcast_doubling(np.arange(n), 1.0, (0,), wb), Layout(1, 1.0)


def _ring_gather_reduce(n, wb, **_):
    """Gloo's reduce (``gloo/reduce.cc``, what torch's Gloo ``reduce`` runs).

    A ring reduce-scatter in which rank ``r`` sends to ``r - 1`` (rank ``r``
    ends owning chunk ``r``), then every rank sends its chunk to the root.
    Gloo posts the root's ``n - 1`` receives at once; they share its link,
    which the step models price by taking them one per step (the step
    models give every transfer of a step a link of its own).
    """
    members = np.array([0, *range(n - 1, 0, -1)], dtype=np.int64)  # 0 -> n-1 -> ... -> 1
    chunks = [(int(r),) for r in members]
    steps = ring_phase(members, chunks, 1 / n, True, wb)
    for r in range(1, n):
        steps.append(_step([r], [0], 1 / n, False, [(r,)], wb))
    return steps, Layout(n, 1 / n)


def _tree_phases(parent: NDArray[np.int64], frac: float, block: Blocks, wb: bool):
    """Reduce up a tree (node sends at step = its height) and broadcast down (step = depth-1)."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int64)
    for v in range(n):  # parents may have larger indices: walk up
        d, u = 0, v
        while parent[u] >= 0:
            u = parent[u]
            d += 1
        depth[v] = d
    height = np.zeros(n, dtype=np.int64)
    for v in np.argsort(-depth, kind="stable"):
        if parent[v] >= 0:
            height[parent[v]] = max(height[parent[v]], height[v] + 1)
    nodes = np.flatnonzero(parent >= 0)
    red = [
        _step(
            nodes[height[nodes] == h],
            parent[nodes[height[nodes] == h]],
            frac,
            True,
            [block] * int((height[nodes] == h).sum()),
            wb,
        )
        for h in range(int(height.max()))
    ]
    bc = [
        _step(
            parent[nodes[depth[nodes] == d]],
            nodes[depth[nodes] == d],
            frac,
            False,
            [block] * int((depth[nodes] == d).sum()),
            wb,
        )
        for d in range(1, int(depth.max()) + 1)
    ]
    return red, bc


def btree_parents(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Parents in NCCL's two complementary binary trees (``-1`` at the root).

    Tree 1 is NCCL's ``ncclGetBtree``: rank ``r`` with lowest set bit ``b`` has
    parent ``(r ^ b) | (b << 1)`` (or ``r ^ b`` if that is out of range); rank 0
    is the root. Tree 2 mirrors it (``n - 1 - r``) for even ``n`` and shifts
    it by one for odd ``n`` (``ncclGetDtree``), so most interior nodes of one
    tree are leaves of the other.
    """
    p1 = np.full(n, -1, dtype=np.int64)
    for r in range(1, n):
        b = r & -r
        up = (r ^ b) | (b << 1)
        p1[r] = up if up < n else r ^ b
    p2 = np.full(n, -1, dtype=np.int64)
    for r in range(n):
        if n % 2 == 0:
            u = p1[n - 1 - r]
            p2[r] = -1 if u < 0 else n - 1 - u
        else:
            u = p1[(r - 1) % n]
            p2[r] = -1 if u < 0 else (u + 1) % n
    return p1, p2


def _double_binary_tree(n, wb, **_):
    """NCCL's double binary tree (``ncclGetDtree``), each tree half the vector."""
    t1, t2 = btree_parents(n)
    r1, b1 = _tree_phases(t1, 0.5, (0,), wb)
    r2, b2 = _tree_phases(t2, 0.5, (1,), wb)
    return parallel(r1, r2) + parallel(b1, b2), Layout(2, 0.5)


def _binary_tree_bcast(n, wb, **_):
    """Binary-heap broadcast tree (parent ``(k - 1) // 2``), not pipelined."""
    parent = np.array([-1] + [(k - 1) // 2 for k in range(1, n)], dtype=np.int64)
    return _tree_phases(parent, 1.0, (0,), wb)[1], Layout(1, 1.0)


def _chain(n, wb, *, segments=1, seg_fracs=None, **_):
    """Pipelined chain 0 -> 1 -> ... -> n-1: at step t rank k forwards segment t - k.

    ``n - 2 + segments`` steps; the steady-state steps in which every link
    carries a full segment are identical and stored once with a repeat count.
    """
    nseg = int(segments)
    fr = np.full(nseg, 1 / nseg) if seg_fracs is None else np.asarray(seg_fracs, dtype=np.float64)
    k = np.arange(n - 1)
    t0 = n - 2
    t1 = nseg - 1 - int(fr[-1] != fr[0])  # last steady step (a short last segment is not steady)
    steps: list[Step] = []
    t = 0
    while t <= n - 2 + nseg - 1:
        if not wb and t == t0 and t1 > t0:
            steps.append(_step(k, k + 1, fr[0], False, [], False))
            steps[-1].repeat = t1 - t0 + 1
            t = t1 + 1
            continue
        seg = t - k
        ok = (seg >= 0) & (seg < nseg)
        kk = k[ok]
        steps.append(_step(kk, kk + 1, fr[seg[ok]], False, [(int(x),) for x in seg[ok]], wb))
        t += 1
    return steps, Layout(nseg, tuple(float(x) for x in fr))


# ----------------------------------------------------------- hierarchical
def _hierarchical(n, wb, *, groups=None, inter=None, **_):
    """Intra-group ring reduce-scatter, inter-group ring allreduce, intra-group allgather.

    Groups are ordered by their lowest new rank; members by new rank.
    ``inter="rings"`` (equal group sizes s, m groups): member l of every
    group joins ring l over the groups, which allreduces chunk l (s-1, then
    2(m-1), then s-1 steps). ``inter="leaders"`` (any sizes): binomial reduce
    to the group leader, ring allreduce over the leaders, binomial broadcast.
    """
    lab = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups)
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    rank_of_group = np.argsort(np.argsort(first))
    g = rank_of_group[inv.reshape(-1)]
    m = int(g.max()) + 1
    members = [np.flatnonzero(g == k) for k in range(m)]
    sizes = {len(x) for x in members}
    if inter is None:
        inter = "rings" if len(sizes) == 1 else "leaders"
    if inter == "rings":
        if len(sizes) != 1:
            raise RankoptInputError(
                "inter='rings' needs groups of equal size; got groups of "
                f"{sorted(sizes)} processes (use inter='leaders')."
            )
        s = sizes.pop()
        # block c*m + q: chunk c (owned by member c), sub-block q (ring position q)
        chunks = [tuple(c * m + q for q in range(m)) for c in range(s)]
        rs = parallel(*[ring_phase(mem, chunks, 1 / s, True, wb) for mem in members])
        ag = parallel(*[ring_phase(mem, chunks, 1 / s, False, wb) for mem in members])
        rings = [np.array([members[k][c] for k in range(m)]) for c in range(s)]
        sub = [[(c * m + q,) for q in range(m)] for c in range(s)]
        mid = parallel(*[ring_phase(rings[c], sub[c], 1 / n, True, wb) for c in range(s)])
        mid += parallel(*[ring_phase(rings[c], sub[c], 1 / n, False, wb) for c in range(s)])
        return rs + mid + ag, Layout(n, 1 / n)
    allb = tuple(range(m))
    red = parallel(*[binomial_reduce(mem, 1.0, allb, wb) for mem in members])
    bc = parallel(*[binomial_bcast(mem, 1.0, allb, wb) for mem in members])
    leaders = np.array([mem[0] for mem in members], dtype=np.int64)
    chunks = [(q,) for q in range(m)]
    mid = ring_phase(leaders, chunks, 1 / m, True, wb) + ring_phase(
        leaders, chunks, 1 / m, False, wb
    )
    return red + mid + bc, Layout(m, 1 / m)


# -------------------------------------------------------------- the registry
#: How an algorithm's transfers are priced (:func:`rankopt.models.make_model`):
#: ``"step"`` step-synchronous (:class:`~rankopt.models.step.StepModel`);
#: ``"concurrent"`` every transfer in flight at once
#: (:class:`~rankopt.models.concurrent.ConcurrentTime`); ``"flow"`` each rank's
#: sends share its link while the tree's levels overlap
#: (:class:`~rankopt.models.flow.FlowTime`); ``"pairwise"`` one exchange per
#: step with an O(1) swap kernel when there is no hierarchy
#: (:class:`~rankopt.models.pairwise.PairwiseTime`); ``"chain"`` a pipelined
#: chain (:class:`~rankopt.models.chain.ChainTime`); ``"hierarchical"`` rings
#: inside groups and across them
#: (:class:`~rankopt.models.step.HierarchicalModel`).
MODEL_KINDS = ("step", "concurrent", "flow", "pairwise", "chain", "hierarchical")

#: What ``schedule()`` hands a generator beyond ``n``: ``"segments"`` (the
#: pipeline's segment count and sizes, from ``nbytes`` and ``segment_size``) and
#: ``"groups"`` (one group label per rank, and ``inter``).
SCHEDULE_OPTIONS = ("segments", "groups")

#: A closed form: ``(p, alpha, nbytes, bandwidth, segment_size) -> seconds``.
ClosedForm = Callable[[int, float, float, float, "float | None"], float]


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm: everything rankopt needs to price and order it.

    Registering one (:func:`register_algorithm`) is all it takes to make it a
    name of :data:`rankopt.models.ALGORITHMS`: ``schedule()``, ``cost()``,
    ``make_model()``, ``solve()``, the CLI's ``--algorithm`` and every suite of
    ``tests/test_algorithm_contract.py`` read it from here.

    Parameters
    ----------
    collective : str
        One of :data:`COLLECTIVES`.
    name : str
        The algorithm's name (the API): lower case, digits and ``_``.
    generator : callable
        ``generator(n, with_blocks, **options) -> (steps, layout)``: the steps of
        concurrent transfers in new-rank numbers (:class:`Step`) and the block
        layout (:class:`Layout`). With ``with_blocks`` every transfer lists the
        blocks it carries, so that a test can execute the schedule.
    doc : str
        One line: what it does and which engine runs it (the source read).
    closed_form : callable, optional
        ``closed_form(p, alpha, nbytes, bandwidth, segment_size)``: its time on
        ``p`` ranks of a uniform network (latency ``alpha``, ``bandwidth``), for
        every ``p >= 2``, not only powers of two. The contract suite holds the
        model to it at 1e-9.
    closed_form_at : {"any", "pow2"}
        The sizes ``closed_form`` holds at: every ``p``, or powers of two only
        (a fold or uneven pieces elsewhere). Where the form holds at every ``p``
        the contract checks sizes that are not powers of two too.
    no_closed_form : str
        Why there is none, when ``closed_form`` is None (required then).
    ring : bool
        Every step alike and every rank playing the same part (a ring): its
        models are invariant under rotating the order, the contention kernel
        stores one step with a repeat count, and the greedy start orders
        clusters for neighbours (optimal leaf ordering) rather than mapping
        them to the bits of recursive partners.
    model : str
        How its transfers are priced; one of :data:`MODEL_KINDS`.
    options : tuple of str
        What ``schedule()`` passes its generator; from :data:`SCHEDULE_OPTIONS`.

    Examples
    --------
    >>> from rankopt.models._algorithms import ALGORITHM_SPECS
    >>> spec = ALGORITHM_SPECS["allreduce", "ring"]
    >>> spec.ring, spec.model, round(spec.closed_form(4, 1e-6, 4e6, 1e9, None) * 1e3, 3)
    (True, 'step', 6.006)
    """

    collective: str
    name: str
    generator: Callable[..., tuple[list[Step], Layout]]
    doc: str
    closed_form: ClosedForm | None = None
    closed_form_at: str = "any"
    no_closed_form: str = ""
    ring: bool = False
    model: str = "step"
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"algorithm {self.collective!r}/{self.name!r}"
        if self.collective not in COLLECTIVES:
            raise RankoptInputError(
                f"{where}: `collective` must be one of {', '.join(map(repr, COLLECTIVES))}."
            )
        if not (isinstance(self.name, str) and _NAME.fullmatch(self.name)):
            raise RankoptInputError(
                f"{where}: `name` must be lower case letters, digits and '_'; got {self.name!r}."
            )
        if not callable(self.generator):
            raise RankoptInputError(
                f"{where}: `generator` must be callable; got {self.generator!r}."
            )
        if not (isinstance(self.doc, str) and self.doc.strip()):
            raise RankoptInputError(f"{where}: `doc` must say in one line what it does.")
        if self.closed_form is None and not self.no_closed_form.strip():
            raise RankoptInputError(
                f"{where}: give a `closed_form`, or say in `no_closed_form` why there is none."
            )
        if self.closed_form_at not in ("any", "pow2"):
            raise RankoptInputError(
                f"{where}: `closed_form_at` must be 'any' or 'pow2'; got {self.closed_form_at!r}."
            )
        if self.model not in MODEL_KINDS:
            raise RankoptInputError(
                f"{where}: `model` must be one of {', '.join(map(repr, MODEL_KINDS))}; "
                f"got {self.model!r}."
            )
        bad = [o for o in self.options if o not in SCHEDULE_OPTIONS]
        if bad:
            raise RankoptInputError(
                f"{where}: `options` must be among {', '.join(map(repr, SCHEDULE_OPTIONS))}; "
                f"got {bad!r}."
            )


_NAME = re.compile(r"[a-z][a-z0-9_]*")

#: The collectives rankopt prices, in this order.
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")

#: (collective, name) -> :class:`Algorithm`, in registration order: the one list of algorithms.
ALGORITHM_SPECS: dict[tuple[str, str], Algorithm] = {}


def register_algorithm(spec: Algorithm, *, replace: bool = False) -> Algorithm:
    """Add ``spec`` to :data:`ALGORITHM_SPECS` and return it.

    Raises
    ------
    RankoptInputError
        If ``spec`` is not an :class:`Algorithm`, or another algorithm of its
        collective has its name (unless ``replace``).
    """
    if not isinstance(spec, Algorithm):
        raise RankoptInputError(f"`spec` must be an Algorithm; got {spec!r}.")
    key = (spec.collective, spec.name)
    if key in ALGORITHM_SPECS and not replace and ALGORITHM_SPECS[key] is not spec:
        raise RankoptInputError(
            f"an algorithm {spec.collective!r}/{spec.name!r} is registered already."
        )
    ALGORITHM_SPECS[key] = spec
    return spec


def algorithm_spec(collective: str, algorithm: str) -> Algorithm:
    """The registered :class:`Algorithm` (names checked by ``check_collective`` first)."""
    try:
        return ALGORITHM_SPECS[collective, algorithm]
    except KeyError:
        raise RankoptInputError(
            f"no algorithm {algorithm!r} for collective {collective!r}; see "
            "rankopt.models.ALGORITHMS."
        ) from None


class _Names(Mapping[str, tuple[str, ...]]):
    """collective -> its algorithms' names, read live from :data:`ALGORITHM_SPECS`."""

    def __getitem__(self, key: str) -> tuple[str, ...]:
        names = tuple(a for c, a in ALGORITHM_SPECS if c == key)
        if not names:
            raise KeyError(key)
        return names

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(c for c, _ in ALGORITHM_SPECS))

    def __len__(self) -> int:
        return len(dict.fromkeys(c for c, _ in ALGORITHM_SPECS))

    def __repr__(self) -> str:
        return repr(dict(self))


#: Valid algorithm names per collective (the names are the API), in registration order.
ALGORITHMS: Mapping[str, tuple[str, ...]] = _Names()


# ---------------------------------------------- closed forms (uniform network)
def _cf_lg(p: int) -> int:
    """ceil(log2 p): the rounds of a binomial tree or of Bruck's doubling."""
    return (p - 1).bit_length()


def _cf_fold_cost(p: int, a: float, m: float, b: float) -> float:
    """The MPICH fold of a non-power of two: the whole vector in, and back out."""
    return 0.0 if p & (p - 1) == 0 else 2 * (a + m / b)


def _cf_ring_like(p, a, m, b, seg):  # p - 1 steps of one block
    return (p - 1) * (a + m / (p * b))


def _cf_halving(p, a, m, b, seg):  # lg p steps, the blocks halve (or double) each step
    return (p.bit_length() - 1) * a + (p - 1) / p * m / b


def _cf_rab(p, a, m, b, seg):  # halving then doubling over the largest power of two, folded
    q = 1 << (p.bit_length() - 1)
    lg = q.bit_length() - 1
    return 2 * lg * a + 2 * (q - 1) / q * m / b + _cf_fold_cost(p, a, m, b)


def _cf_rab_ompi(p, a, m, b, seg):  # Open MPI folds in three steps: M/2 both ways, M/2, M
    q = 1 << (p.bit_length() - 1)
    fold = 0.0 if p == q else 3 * a + 2 * m / b
    return _cf_rab(q, a, m, b, seg) + fold


def _spec(c, name, gen, doc, form=None, **kw) -> None:
    register_algorithm(Algorithm(c, name, gen, doc, closed_form=form, **kw))


# fmt: off
_spec("allreduce", "ring", _ring_allreduce,
      "ring reduce-scatter then ring allgather, rank r sending to r + 1",
      lambda p, a, m, b, seg: 2 * (p - 1) * (a + m / (p * b)), ring=True)
_spec("allreduce", "ring_gloo", _ring_allreduce_gloo,
      "Gloo's ring: reduce-scatter then allgather, rank r sending to r - 1",
      lambda p, a, m, b, seg: 2 * (p - 1) * (a + m / (p * b)), ring=True)
_spec("allreduce", "recursive_doubling", _rd_allreduce,
      "recursive doubling, distance 1 first, the whole vector every step (Open MPI, MPICH)",
      lambda p, a, m, b, seg: ((p.bit_length() - 1) * (a + m / b) + _cf_fold_cost(p, a, m, b)))
_spec("allreduce", "rabenseifner", _rabenseifner,
      "recursive halving then doubling, distance p/2 first (Thakur et al. 2005)", _cf_rab)
_spec("allreduce", "rabenseifner_ompi", _rabenseifner_ompi,
      "Open MPI's redscat_allgather: vector halving at distance 1 first", _cf_rab_ompi)
_spec("allreduce", "rabenseifner_mpich", _rabenseifner_mpich,
      "MPICH's reduce_scatter_allgather, halving at distance 1 first", _cf_rab)
_spec("allreduce", "binomial", _binomial_allreduce,
      "binomial reduce to rank 0 then binomial broadcast (MPICH trees)",
      lambda p, a, m, b, seg: 2 * _cf_lg(p) * (a + m / b))
_spec("allreduce", "double_binary_tree", _double_binary_tree,
      "NCCL's double binary tree (ncclGetDtree), each tree half the vector",
      lambda p, a, m, b, seg: 2 * (p.bit_length() - 1) * (a + m / (2 * b)),
      closed_form_at="pow2")
_spec("allreduce", "hierarchical", _hierarchical,
      "intra-group ring reduce-scatter, inter-group ring allreduce, intra-group allgather",
      no_closed_form="its time depends on the groups; tests price it per group shape",
      model="hierarchical", options=("groups",))
_spec("allgather", "ring", _ring_allgather,
      "ring allgather, rank r sending to r + 1 (MPICH, Open MPI, Gloo)", _cf_ring_like, ring=True)
_spec("allgather", "recursive_doubling", _rd_allgather,
      "recursive-doubling allgather, distance 1 first (MPICH; MPICH fold)",
      _cf_halving, closed_form_at="pow2")
_spec("allgather", "bruck", _bruck,
      "Bruck allgather, distance 1 first, sending to r - d (MPICH's order)",
      lambda p, a, m, b, seg: _cf_lg(p) * a + (p - 1) / p * m / b)
_spec("reduce_scatter", "ring", _ring_reduce_scatter,
      "ring reduce-scatter, rank r sending to r + 1 (MPICH)", _cf_ring_like, ring=True)
_spec("reduce_scatter", "allreduce_gloo", _ring_allreduce_gloo,
      "torch's Gloo reduce_scatter: Gloo's ring allreduce (rank r sending to r - 1) of the "
      "whole input, each rank keeping its block",
      lambda p, a, m, b, seg: 2 * (p - 1) * (a + m / (p * b)), ring=True)
_spec("reduce_scatter", "recursive_halving", _rh_reduce_scatter,
      "recursive-halving reduce-scatter, distance p/2 first (MPICH)",
      _cf_halving, closed_form_at="pow2")
_spec("reduce_scatter", "pairwise", _pairwise_reduce_scatter,
      "MPICH's pairwise reduce-scatter: step i sends to r + i", _cf_ring_like)
_spec("broadcast", "binomial", _binomial_bcast,
      "MPICH binomial broadcast, largest distance first",
      lambda p, a, m, b, seg: _cf_lg(p) * (a + m / b))
# a rank's lg p - h sends share its link: path 0 -> 1 -> 3 -> 7 ...
_spec("broadcast", "binomial_gloo", _binomial_gloo_bcast,
      "Gloo's binomial broadcast, distance 1 first, a rank's sends sharing its link",
      lambda p, a, m, b, seg: (lg := p.bit_length() - 1) * a + lg * (lg + 1) / 2 * m / b,
      closed_form_at="pow2", model="flow")
_spec("broadcast", "binary_tree", _binary_tree_bcast,
      "binary-heap broadcast tree (parent (k - 1) // 2), not pipelined",
      lambda p, a, m, b, seg: (p.bit_length() - 1) * (a + m / b))
_spec("broadcast", "chain", _chain,
      "pipelined chain 0 -> 1 -> ... -> n-1, one segment per link per step",
      lambda p, a, m, b, seg: (p - 2 + m / seg) * (a + seg / b),
      model="chain", options=("segments",))
_spec("broadcast", "scatter_ring_allgather", _scatter_ring_bcast,
      "MPICH's scatter_ring_allgather: binomial scatter, ring allgather",
      lambda p, a, m, b, seg: (p.bit_length() - 1 + p - 1) * a + 2 * (p - 1) / p * m / b,
      closed_form_at="pow2")
_spec("broadcast", "scatter_recursive_doubling_allgather", _scatter_rd_bcast,
      "MPICH's scatter_recursive_doubling_allgather broadcast",
      _cf_rab, closed_form_at="pow2")
_spec("reduce", "binomial", _binomial_reduce,
      "MPICH binomial reduce to rank 0, distance 1 first",
      lambda p, a, m, b, seg: _cf_lg(p) * (a + m / b))
_spec("reduce", "reduce_scatter_gather", _reduce_scatter_gather,
      "MPICH's reduce_scatter_gather reduce to rank 0",
      _cf_rab, closed_form_at="pow2")
# ring reduce-scatter, then the root takes p - 1 chunks in turn
_spec("reduce", "ring_gather", _ring_gather_reduce,
      "Gloo's reduce: ring reduce-scatter, then rank 0 takes the p - 1 chunks in turn",
      lambda p, a, m, b, seg: 2 * (p - 1) * (a + m / (p * b)))
_spec("alltoall", "pairwise", _pairwise,
      "pairwise exchange: r ^ i on powers of two, else r + i (MPICH, Open MPI)",
      _cf_ring_like, model="pairwise")
# every block at once through one link
_spec("alltoall", "linear", _linear_alltoall,
      "every block at once (Open MPI's basic_linear/linear_sync, MPICH's scattered)",
      lambda p, a, m, b, seg: a + (p - 1) / p * m / b, model="concurrent")
# fmt: on
