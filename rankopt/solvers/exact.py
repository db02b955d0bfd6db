"""Exact methods for small n: the ground truth of the test suite.

``brute_force``
    Every order (rank 0 fixed at position 0 for rotation-invariant ring
    models): ``(n-1)!`` or ``n!`` evaluations, vectorised in batches.
``held_karp``
    Dynamic programming over subsets for the ring ``sum`` (directed, so
    asymmetric input is solved exactly): ``O(2^n n^2)`` time, ``O(2^n n)``
    memory; up to n = 17.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from rankopt._build_check import require_extension
from rankopt._validation import RankoptInputError
from rankopt.models.base import CostModel
from rankopt.models.ring import RingSum
from rankopt.solvers._base import MethodOutput, SolveContext, register

_exact = require_extension("rankopt.solvers._exact")

__all__ = ["brute_force", "held_karp", "exact", "BRUTE_FORCE_MAX_N", "HELD_KARP_MAX_N"]

BRUTE_FORCE_MAX_N = 10
HELD_KARP_MAX_N = 17
_BATCH = 20_000


def _fixed_first(model: CostModel, ctx: SolveContext) -> bool:
    return model.rotation_invariant or ctx.keep_rank0


@register("brute_force", doc="every order (n <= 10 for rings, 9 otherwise)")
def brute_force(model: CostModel, ctx: SolveContext) -> MethodOutput:
    n = model.n
    fixed = _fixed_first(model, ctx)
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
    while True:
        chunk = list(itertools.islice(perms, _BATCH))
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
    assert best is not None
    return MethodOutput(best, iterations=evals, evaluations=evals, stop_reason="optimal")


@register("held_karp", doc="dynamic programming for the ring sum, n <= 16")
def held_karp(model: CostModel, ctx: SolveContext) -> MethodOutput:
    if not isinstance(model, RingSum):
        raise RankoptInputError(
            f"method 'held_karp' solves the ring objective 'sum' only; got objective "
            f"{model.objective!r}. Use method='brute_force'."
        )
    n = model.n
    if n > HELD_KARP_MAX_N:
        raise RankoptInputError(
            f"method 'held_karp' needs O(2^n n) memory and accepts n <= {HELD_KARP_MAX_N}; got n={n}."
        )
    cost, order = _exact.held_karp(model.latency)
    ctx.record(cost, 1)
    return MethodOutput(
        order, iterations=1, evaluations=(1 << (n - 1)) * (n - 1) ** 2, stop_reason="optimal"
    )


@register("exact", doc="held_karp for the ring sum, brute_force otherwise")
def exact(model: CostModel, ctx: SolveContext) -> MethodOutput:
    out = held_karp(model, ctx) if isinstance(model, RingSum) else brute_force(model, ctx)
    out.method = "held_karp" if isinstance(model, RingSum) else "brute_force"
    return out
