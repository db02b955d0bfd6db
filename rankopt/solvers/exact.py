"""Exact methods for small n: the ground truth of the test suite.

``brute_force``
    Every order: ``(n-1)!`` evaluations with process 0 at position 0 (a
    symmetry of rotation-invariant models, a requirement under
    ``keep_rank0``), else ``n!``; vectorised in batches. Up to
    ``BRUTE_FORCE_MAX_N`` = 10 (with process 0 fixed), 9 otherwise. Under
    ``time_limit`` it stops after the batch in which the limit passed (batches
    stay short for slow objectives), with ``stop_reason="time_limit"`` and the
    best order seen.
``held_karp``
    Dynamic programming over subsets for models whose cost is the directed
    ring sum over a matrix (``capabilities.ring_matrix``; asymmetric input is
    solved exactly): ``O(2^n n^2)`` time, ``O(2^n n)`` memory; up to
    ``HELD_KARP_MAX_N`` = 17.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np

from rankopt._build_check import require_extension
from rankopt._validation import RankoptInputError
from rankopt.models.base import CostModel
from rankopt.solvers._base import MethodOutput, SolveContext, rank0_pinned, register

_exact = require_extension("rankopt.solvers._exact")

__all__ = ["brute_force", "held_karp", "exact", "BRUTE_FORCE_MAX_N", "HELD_KARP_MAX_N"]

BRUTE_FORCE_MAX_N = 10
HELD_KARP_MAX_N = 17
_BATCH = 20_000


@register(
    "brute_force",
    doc=f"every order (n <= {BRUTE_FORCE_MAX_N} for rings, {BRUTE_FORCE_MAX_N - 1} otherwise)",
)
def brute_force(model: CostModel, ctx: SolveContext) -> MethodOutput:
    n = model.n
    # process 0 at position 0: pinned, or w.l.o.g. when rotations cost the same
    fixed = model.capabilities.rotation_invariant or rank0_pinned(model, ctx)
    limit = BRUTE_FORCE_MAX_N if fixed else BRUTE_FORCE_MAX_N - 1
    if n > limit:
        raise RankoptInputError(
            f"method 'brute_force' enumerates {'(n-1)!' if fixed else 'n!'} orders and accepts "
            f"n <= {limit}; got n={n}."
        )
    rest = range(1, n) if fixed else range(n)
    best_cost = math.inf
    best = None
    evals = 0
    perms = itertools.permutations(rest)
    # under a time limit, batches start small and grow while they stay short, so a
    # slow objective (a Python callable) is stopped within about one short batch
    batch = _BATCH if ctx.time_limit is None else 16
    stop = "optimal"
    while True:
        if ctx.out_of_time() and best is not None:
            stop = "time_limit"
            break
        t_batch = time.perf_counter()
        chunk = list(itertools.islice(perms, batch))
        if not chunk:
            break
        arr = np.array(chunk, dtype=np.int64).reshape(len(chunk), -1)
        if fixed:
            arr = np.hstack([np.zeros((len(chunk), 1), dtype=np.int64), arr])
        costs = model.batch_cost(arr)
        evals += len(chunk)
        k = int(np.argmin(costs))
        if best is None or costs[k] < best_cost:
            best_cost = float(costs[k])
            best = arr[k].copy()
            ctx.record(best_cost, evals)
        if ctx.time_limit is not None and time.perf_counter() - t_batch < 0.05:
            batch = min(2 * batch, _BATCH)
    assert best is not None
    return MethodOutput(best, iterations=evals, evaluations=evals, stop_reason=stop)


@register("held_karp", doc=f"dynamic programming for the ring sum, n <= {HELD_KARP_MAX_N}")
def held_karp(model: CostModel, ctx: SolveContext) -> MethodOutput:
    caps = model.capabilities
    n = model.n
    if not caps.ring_sum_exact:
        fixed = caps.rotation_invariant or rank0_pinned(model, ctx)
        fits = n <= (BRUTE_FORCE_MAX_N if fixed else BRUTE_FORCE_MAX_N - 1)
        raise RankoptInputError(
            f"method 'held_karp' solves the ring objective 'sum' only; got objective "
            f"{model.objective!r}. Use method={'brute_force' if fits else 'auto'!r}."
        )
    if n > HELD_KARP_MAX_N:
        raise RankoptInputError(
            f"method 'held_karp' needs O(2^n n) memory and accepts n <= {HELD_KARP_MAX_N}; got n={n}."
        )
    assert caps.ring_matrix is not None
    cost, order = _exact.held_karp(caps.ring_matrix)
    ctx.record(cost, 1)
    return MethodOutput(
        order, iterations=1, evaluations=(1 << (n - 1)) * (n - 1) ** 2, stop_reason="optimal"
    )


@register("exact", doc="held_karp for the ring sum, brute_force otherwise")
def exact(model: CostModel, ctx: SolveContext) -> MethodOutput:
    dp = model.capabilities.ring_sum_exact
    out = held_karp(model, ctx) if dp else brute_force(model, ctx)
    out.method = "held_karp" if dp else "brute_force"
    return out
