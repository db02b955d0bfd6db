"""Schedules: a collective algorithm as steps of concurrent transfers.

Contents
--------
Schedule
    The flat, step-by-step transfer list every cost model is built from.
schedule
    ``schedule(collective, algorithm, n, ...)`` for every algorithm in
    :data:`ALGORITHMS`.
ALGORITHMS
    Valid algorithm names per collective, read live from the registry
    (:func:`rankopt.models.register_algorithm`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._limits import check_ranks
from rankopt._validation import (
    RankoptInputError,
    check_options,
    check_positive,
    check_quantity,
)
from rankopt.models._algorithms import ALGORITHMS, Layout, algorithm_spec

__all__ = ["Schedule", "schedule", "ALGORITHMS", "DEFAULT_SEGMENT_SIZE", "chain_segments"]


#: Segment size (bytes) of the pipelined chain broadcast when none is given.
DEFAULT_SEGMENT_SIZE = 1 << 16


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective algorithm as a sequence of steps of concurrent transfers.

    Transfers are stored flat, step after step: the transfers of distinct
    step ``s`` are ``src[e], dst[e], frac[e]`` for ``e`` in
    ``step_ptr[s]:step_ptr[s+1]``; that step runs ``repeat[s]`` times back
    to back (identical consecutive steps -- a ring's -- are stored once).
    Ranks are *new* ranks; transfer ``k -> j`` travels from process
    ``order[k]`` to ``order[j]``. A transfer moves ``frac * nbytes`` bytes.

    Attributes
    ----------
    collective, algorithm : str
    n : int
        Number of ranks.
    src, dst : ndarray of int64
    frac : ndarray of float64
    step_ptr : ndarray of int64, shape (n_distinct + 1,)
    repeat : ndarray of int64, shape (n_distinct,)
    reduce : ndarray of bool, shape (n_distinct,)
        Whether receivers combine (reduction) or store the payload.
    blocks : list of tuple of int, or None
        With ``schedule(..., blocks=True)``: the data blocks each transfer
        carries (for symbolic execution); ``repeat`` is then all ones.
    layout : Layout
        ``nblocks`` and the size of a block as a fraction of ``nbytes``.
    """

    collective: str
    algorithm: str
    n: int
    src: NDArray[np.int64]
    dst: NDArray[np.int64]
    frac: NDArray[np.float64]
    step_ptr: NDArray[np.int64]
    repeat: NDArray[np.int64]
    reduce: NDArray[np.bool_]
    layout: Layout
    blocks: list[tuple[int, ...]] | None = None
    _pattern: list[Any] = field(default_factory=list, repr=False)

    @property
    def n_distinct(self) -> int:
        """Number of distinct steps stored."""
        return len(self.repeat)

    @property
    def n_steps(self) -> int:
        """Number of steps the algorithm runs (repeats counted)."""
        return int(self.repeat.sum())

    @property
    def n_transfers(self) -> int:
        """Transfers stored (repeats not counted)."""
        return len(self.src)

    def steps(self) -> list[list[tuple[int, int, float]]]:
        """Expanded steps as lists of ``(src, dst, frac)`` (repeats expanded)."""
        out = []
        for s in range(self.n_distinct):
            a, b = self.step_ptr[s], self.step_ptr[s + 1]
            st = [
                (int(x), int(y), float(f))
                for x, y, f in zip(self.src[a:b], self.dst[a:b], self.frac[a:b], strict=False)
            ]
            out.extend([st] * int(self.repeat[s]))
        return out

    def partners(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """The ranks each rank exchanges data with, and how much: ``(ptr, idx, weight)``.

        New rank ``k`` sends to or receives from the ranks ``idx[ptr[k]:ptr[k + 1]]``
        (sorted), ``weight`` of them in units of ``nbytes`` (``frac`` times
        ``repeat``, both directions summed) -- what a search that moves
        processes next to their partners weighs them by.

        Examples
        --------
        >>> ptr, idx, w = schedule("allreduce", "recursive_doubling", 4).partners()
        >>> idx[ptr[0]:ptr[1]].tolist(), w[ptr[0]:ptr[1]].tolist()
        ([1, 2], [2.0, 2.0])
        """
        n, ne = self.n, self.n_transfers
        tstep = np.repeat(np.arange(self.n_distinct), np.diff(self.step_ptr))
        w = self.frac[:ne] * self.repeat[tstep]
        a = np.concatenate([self.src[:ne], self.dst[:ne]])
        b = np.concatenate([self.dst[:ne], self.src[:ne]])
        keep = a != b
        key, inv = np.unique(a[keep] * n + b[keep], return_inverse=True)
        weight = np.bincount(inv.reshape(-1), np.concatenate([w, w])[keep], minlength=len(key))
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(key // n, minlength=n))
        return ptr, (key % n).astype(np.int64), weight.astype(np.float64)

    def pattern(self) -> list[tuple[str, int, float, int] | None]:
        """Structure of each distinct step, for constructive solvers.

        For each distinct step: ``("xor", d, frac, repeat)`` when every
        transfer pairs ``k`` with ``k ^ d`` (recursive doubling/halving,
        Rabenseifner, pairwise exchange on powers of two), ``("shift", d,
        frac, repeat)`` when every transfer goes from ``k`` to ``(k + d) % n``
        (rings, Bruck, pairwise on other sizes), else ``None``. ``frac`` is
        the largest payload of the step as a fraction of ``nbytes``.
        """
        if self._pattern:
            return list(self._pattern)
        out: list[tuple[str, int, float, int] | None] = []
        for s in range(self.n_distinct):
            a, b = self.step_ptr[s], self.step_ptr[s + 1]
            x, y = self.src[a:b], self.dst[a:b]
            f = float(self.frac[a:b].max())
            rep = int(self.repeat[s])
            xo = np.unique(x ^ y)
            sh = np.unique((y - x) % self.n)
            if len(xo) == 1:
                out.append(("xor", int(xo[0]), f, rep))
            elif len(sh) == 1:
                out.append(("shift", int(sh[0]), f, rep))
            else:
                out.append(None)
        self._pattern.extend(out)
        return out


def chain_segments(
    nbytes: float | None, segment_size: float | None
) -> tuple[int, NDArray[np.float64]]:
    """Number of chain segments and their sizes as fractions of ``nbytes``.

    ``ceil(nbytes / segment_size)`` segments of ``segment_size`` bytes (the
    last one shorter); one segment when ``nbytes`` is unknown.
    """
    if nbytes is None:
        return 1, np.ones(1)
    from rankopt._limits import check_chain_segments

    check_chain_segments(nbytes, segment_size, "chain_segments()", default=DEFAULT_SEGMENT_SIZE)
    seg = DEFAULT_SEGMENT_SIZE if segment_size is None else segment_size
    k = max(1, math.ceil(nbytes / seg - 1e-12))
    sizes = np.full(k, float(seg))
    sizes[-1] = nbytes - seg * (k - 1)
    return k, sizes / nbytes


#: What ``"ring"`` (the default algorithm) prices on a collective that has no ring:
#: its ring-shaped pattern. A broadcast's is the pipelined chain along the ring
#: (NCCL's ring broadcast), a reduce's the ring reduce-scatter then the gather to
#: the root, an all-to-all's the pairwise exchange (step ``s``: rank ``k`` to
#: ``k + s``, the ring's shifts).
RING_PATTERN = {"broadcast": "chain", "reduce": "ring_gather", "alltoall": "pairwise"}


def ring_pattern(collective: str, algorithm: str) -> str:
    """``algorithm``, or for ``"ring"`` on a collective without one its ring pattern.

    >>> ring_pattern("broadcast", "ring"), ring_pattern("allreduce", "ring")
    ('chain', 'ring')
    >>> ring_pattern("broadcast", "binomial")
    'binomial'
    """
    if algorithm == "ring" and "ring" not in ALGORITHMS.get(collective, ("ring",)):
        return RING_PATTERN.get(collective, algorithm)
    return algorithm


def check_collective(collective: str, algorithm: str) -> None:
    """Raise a clear error for an unknown collective or algorithm."""
    check_options("collective", collective, tuple(ALGORITHMS))
    if algorithm not in ALGORITHMS[collective]:
        raise RankoptInputError(
            f"`algorithm` must be one of {', '.join(map(repr, ALGORITHMS[collective]))} "
            f"for collective {collective!r}; got {algorithm!r} instead."
        )


def schedule(
    collective: str,
    algorithm: str,
    n: int,
    *,
    nbytes: float | None = None,
    segment_size: float | None = None,
    groups: ArrayLike | None = None,
    inter: str | None = None,
    blocks: bool = False,
) -> Schedule:
    """The steps of a collective algorithm on ``n`` ranks.

    Parameters
    ----------
    collective : str
        ``"allreduce"``, ``"allgather"``, ``"reduce_scatter"``,
        ``"broadcast"``, ``"reduce"`` or ``"alltoall"``.
    algorithm : str
        One of ``ALGORITHMS[collective]``.
    n : int
        Number of ranks (>= 2).
    nbytes : float, optional
        Size of each rank's full result buffer in bytes (allreduce: the
        vector; allgather: the gathered output; reduce_scatter: the input
        vector; broadcast/reduce: the message; alltoall: each rank's whole
        send buffer). Only the pipelined chain needs it (segment count).
    segment_size : float, optional
        Chain broadcast segment size in bytes (default
        :data:`DEFAULT_SEGMENT_SIZE`).
    groups : array_like of int, optional
        Hierarchical allreduce only: the group label of each *new* rank
        (default: one group).
    inter : {"rings", "leaders"}, optional
        Hierarchical allreduce only: inter-group phase (default ``"rings"``
        when all groups have the same size, else ``"leaders"``).
    blocks : bool
        Also record which data blocks each transfer carries (slow; for
        symbolic execution in tests). Repeated steps are then expanded.

    Returns
    -------
    Schedule

    Notes
    -----
    Roots (broadcast, reduce) are new rank 0. Non-powers of two in recursive
    doubling/halving and Rabenseifner are folded as in MPICH: ranks ``2i``
    (``i < n - 2**floor(lg n)``) first hand their data to ``2i+1`` and get the
    result back in a last step. ``"rabenseifner"`` follows the textbook step
    order (Thakur, Rabenseifner & Gropp 2005: the half-vector exchange at
    distance ``p/2`` first); ``"rabenseifner_mpich"`` follows MPICH's
    ``reduce_scatter_allgather`` (distance 1 first, MPICH's fold) and
    ``"rabenseifner_ompi"`` Open MPI's ``redscat_allgather`` (distance 1
    first, Open MPI's fold). Each generator's docstring in
    :mod:`rankopt.models._algorithms` names the implementation it follows. The double binary tree is NCCL's
    (``ncclGetDtree``); each tree carries half of the vector, reducing up and
    then broadcasting down, not pipelined.

    Examples
    --------
    >>> s = schedule("allreduce", "recursive_doubling", 4)
    >>> s.n_steps, s.steps()[0]
    (2, [(0, 1, 1.0), (1, 0, 1.0), (2, 3, 1.0), (3, 2, 1.0)])
    >>> schedule("allreduce", "ring", 8).n_steps  # 2(n-1) alike steps, stored once each phase
    14
    """
    check_collective(collective, algorithm)
    n = check_ranks(n, "schedule()")
    spec = algorithm_spec(collective, algorithm)
    opts: dict[str, Any] = {}
    if "segments" in spec.options:
        if segment_size is not None:
            segment_size = check_positive(segment_size, "segment_size")
        if nbytes is not None:
            nbytes = check_quantity(nbytes, "nbytes", "nbytes")
        k, fr = chain_segments(nbytes, segment_size)
        opts.update(segments=k, seg_fracs=fr)
    if "groups" in spec.options:
        if groups is not None:
            lab = np.asarray(groups)
            if lab.shape != (n,):
                raise RankoptInputError(
                    f"`groups` must give one label per rank, shape ({n},); got shape {lab.shape}."
                )
            opts["groups"] = lab
        if inter is not None:
            check_options("inter", inter, ("rings", "leaders"))
            if inter == "rings" and groups is not None:
                sizes = np.unique(np.unique(np.asarray(groups), return_counts=True)[1])
                if len(sizes) > 1:
                    raise RankoptInputError(
                        f"inter='rings' needs groups of equal size; got sizes {sizes.tolist()}."
                    )
            opts["inter"] = inter
    steps, layout = spec.generator(n, bool(blocks), **opts)
    if not blocks:
        steps = _compress(steps)
    ptr = np.zeros(len(steps) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(s.src) for s in steps])
    cat = (
        (lambda xs, dt: np.concatenate(xs).astype(dt))
        if steps
        else (lambda xs, dt: np.zeros(0, dtype=dt))
    )
    return Schedule(
        collective=collective,
        algorithm=algorithm,
        n=n,
        src=np.ascontiguousarray(cat([s.src for s in steps], np.int64)),
        dst=np.ascontiguousarray(cat([s.dst for s in steps], np.int64)),
        frac=np.ascontiguousarray(cat([s.frac for s in steps], np.float64)),
        step_ptr=ptr,
        repeat=np.array([s.repeat for s in steps], dtype=np.int64),
        reduce=np.array([s.reduce for s in steps], dtype=bool),
        layout=layout,
        blocks=[b for s in steps for b in (s.blocks or [])] if blocks else None,
    )


def _compress(steps):
    """Merge runs of identical consecutive steps into one step with a repeat count."""
    out = []
    for s in steps:
        if out:
            p = out[-1]
            if (
                p.reduce == s.reduce
                and len(p.src) == len(s.src)
                and np.array_equal(p.src, s.src)
                and np.array_equal(p.dst, s.dst)
                and np.array_equal(p.frac, s.frac)
            ):
                p.repeat += s.repeat
                continue
        out.append(s)
    return out
