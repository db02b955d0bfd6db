"""Numba kernels of the custom-objective annealing loop (:mod:`rankopt.solvers.custom`).

The user's objective comes in as a first-class function of one fixed type,
``float64(readonly float64[:, ::1], int64[::1])`` (a writable matrix is
accepted where a read-only one is declared), so every kernel here has one
signature: it is compiled once, cached on disk (``cache=True``) and loaded
from the cache by later processes, whatever objective they bring. (A kernel
specialised to each objective would miss the cache in every new process and
add a cache entry each time.) Importing this module imports Numba and loads
or compiles the kernels; :func:`rankopt.solvers.custom.anneal_custom`
imports it on first use, so ``import rankopt`` does neither.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types

__all__ = ["OBJECTIVE", "sample_swaps", "run"]

#: The matrix the objective reads: float64, C order, read-only or not.
_LATENCY = types.Array(types.float64, 2, "C", readonly=True)
#: The type a user's objective is called through: ``f(latency, order) -> float``.
OBJECTIVE = types.FunctionType(types.float64(_LATENCY, types.int64[::1]))

_STATE = types.uint64[::1]


@numba.njit(types.float64(_STATE), cache=True, nogil=True)
def _rand(state):
    """splitmix64 step -> float in [0, 1)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


_INDEX = types.int64[::1]
_NEIGHBORS = types.Array(types.int64, 2, "C", readonly=True)


@numba.njit(
    types.UniTuple(types.int64, 2)(_INDEX, _INDEX, _NEIGHBORS, types.int64, types.float64, _STATE),
    cache=True,
    nogil=True,
)
def _pick(order, pos, nbr, lo, p_near, state):
    """Two positions ``>= lo`` to swap: random, or (probability ``p_near``) near.

    A near pair puts the process of a random position against one of the
    ``nbr`` nearest nodes of its node; returns ``(i, i)`` when that node's
    position is pinned (below ``lo``), a move the caller skips.
    """
    m = order.shape[0] - lo
    i = lo + int(_rand(state) * m)
    if _rand(state) < p_near:
        row = nbr[order[i]]
        j = pos[row[int(_rand(state) * row.shape[0])]]
        if j < lo:
            j = i
    else:
        j = lo + int(_rand(state) * m)
        if i == j:
            j = lo + (j - lo + 1) % m
    return i, j


@numba.njit(
    types.float64[::1](
        OBJECTIVE,
        _LATENCY,
        _INDEX,
        _INDEX,
        _NEIGHBORS,
        types.int64,
        types.int64,
        types.float64,
        _STATE,
    ),
    cache=True,
    nogil=True,
)
def sample_swaps(f, lat, order, pos, nbr, lo, count, p_near, state):
    """Cost changes of ``count`` swaps (:func:`_pick`) from ``order``, which is left as it was.

    A pinned near pick is sampled as a zero change.
    """
    cur = f(lat, order)
    out = np.zeros(count)
    for t in range(count):
        i, j = _pick(order, pos, nbr, lo, p_near, state)
        if i == j:
            continue
        order[i], order[j] = order[j], order[i]
        out[t] = f(lat, order) - cur
        order[i], order[j] = order[j], order[i]
    return out


@numba.njit(
    types.Tuple((types.float64, types.float64, types.float64, types.int64))(
        OBJECTIVE,
        _LATENCY,
        _INDEX,
        _INDEX,
        _NEIGHBORS,
        types.int64,
        types.int64,
        types.float64,
        types.float64,
        types.float64,
        _STATE,
        types.float64,
        _INDEX,
        types.float64,
    ),
    cache=True,
    nogil=True,
)
def run(f, lat, order, pos, nbr, lo, iters, temp, factor, p_near, state, cur, best, best_cost):
    """``iters`` Metropolis proposals at positions ``>= lo``: swaps (:func:`_pick`), or inserts.

    An insert (probability 0.2) moves one process to another position, the
    ones in between shift. The temperature is multiplied by ``factor``
    before each proposal; at temperature 0 only moves that do not raise the
    cost are taken (a descent). Resumable: the generator state, temperature
    and current cost come in and go out, so slicing a run changes nothing
    but where it may stop. Returns ``(cur, temp, best_cost, accepted)``;
    ``order``, its inverse ``pos`` and ``best`` are updated in place.
    """
    m = order.shape[0] - lo
    tmp = order.copy()
    accepted = 0
    for _ in range(iters):
        insert = _rand(state) < 0.2
        if insert:
            i = lo + int(_rand(state) * m)
            j = lo + int(_rand(state) * m)
        else:
            i, j = _pick(order, pos, nbr, lo, p_near, state)
        u = _rand(state)
        temp *= factor
        if i == j:
            continue
        if insert:
            tmp[:] = order
            v = tmp[i]
            if i < j:
                tmp[i:j] = order[i + 1 : j + 1]
            else:
                tmp[j + 1 : i + 1] = order[j:i]
            tmp[j] = v
            c = f(lat, tmp)
        else:
            order[i], order[j] = order[j], order[i]
            c = f(lat, order)
            order[i], order[j] = order[j], order[i]
        d = c - cur
        if d <= 0.0 or (temp > 0.0 and u < math.exp(-d / temp)):
            if insert:
                order[:] = tmp
                for k in range(min(i, j), max(i, j) + 1):
                    pos[order[k]] = k
            else:
                order[i], order[j] = order[j], order[i]
                pos[order[i]] = i
                pos[order[j]] = j
            cur = c
            accepted += 1
            if cur < best_cost:
                best_cost = cur
                best[:] = order
    return cur, temp, best_cost, accepted
